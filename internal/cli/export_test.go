package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/trainset"
)

// TestExportTrajectoriesCommand exports the same records through a
// coordinator with auth on (read token) and from the store directly, checks
// them with the strict reader, resumes with --after and refuses bad flags.
func TestExportTrajectoriesCommand(t *testing.T) {
	t.Setenv("RATH_SERVER", "")
	t.Setenv("RATH_TOKEN", "")
	t.Setenv("RATH_STORE", "")
	t.Setenv("RATH_HOME", t.TempDir())
	ctx := context.Background()
	dir := t.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "rath.db")
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	tokens, err := d.Backend.TokenStore()
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(d.Backend.Store, d.Backend.Runs, d.Backend.Bus, coordinator.Config{RequireAuth: true, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)

	st := d.Backend.Store
	for i := range 5 {
		root, err := session.New(ctx, st, session.System("terse"), session.User("task "+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("done")},
			Producer: session.Producer{Run: "run-x", Agent: "a", Model: "m"}}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := rathctl(t, "", args...)
		if code != want {
			t.Fatalf("rathctl %v: exit %d, want %d: %s %s", args, code, want, out, errOut)
		}
		return out, errOut
	}
	out, _ := run(0, "token", "create", "--store", storeURL, "--scope", "read", "--name", "trainer")
	read := strings.TrimSpace(out)
	server := []string{"--server", srv.URL, "--token", read}

	_, errOut := run(1, "export", "trajectories", "--run", "run-x", "--server", srv.URL)
	if !strings.Contains(errOut, "401") {
		t.Fatalf("without a token: %s", errOut)
	}
	viaAPI, progress := run(0, append([]string{"export", "trajectories", "--run", "run-x"}, server...)...)
	viaStore, _ := run(0, "export", "trajectories", "--run", "run-x", "--store", storeURL, "--quiet")
	if viaAPI != viaStore {
		t.Fatalf("the coordinator and the store export differently:\n%s\n---\n%s", viaAPI, viaStore)
	}
	if !strings.Contains(progress, "export: 5 records") || !strings.Contains(progress, "exported 5 records") {
		t.Errorf("progress on stderr: %q", progress)
	}
	var recs []trainset.OpenAIRecord
	if err := trainset.ReadOpenAI(strings.NewReader(viaAPI), func(r trainset.OpenAIRecord) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	// Resume after the second record, through the API.
	rest, _ := run(0, append([]string{"export", "trajectories", "--run", "run-x", "--after", recs[1].Provenance.Cursor, "--quiet"}, server...)...)
	if want := strings.Join(strings.SplitAfter(viaAPI, "\n")[2:], ""); rest != want {
		t.Errorf("--after: got\n%s\nwant\n%s", rest, want)
	}
	// -o json: the counts, on stderr (stdout holds the records).
	_, errOut = run(0, append([]string{"export", "trajectories", "--run", "run-x", "--quiet", "-o", "json", "--format", "openrath"}, server...)...)
	var stats trainset.Stats
	if err := json.Unmarshal([]byte(errOut), &stats); err != nil || stats.Written != 5 {
		t.Errorf("-o json stats %q: %v %+v", errOut, err, stats)
	}
	// The provenance verifies through the coordinator.
	run(0, append([]string{"verify", recs[4].Provenance.VersionID.String()}, server...)...)
	// Labels and pairs: two branches of one prompt, labeled through the
	// coordinator (a read token cannot label; an admin one can).
	out, _ = run(0, "token", "create", "--store", storeURL, "--scope", "admin", "--name", "labeler")
	admin := []string{"--server", srv.URL, "--token", strings.TrimSpace(out)}
	root, err := session.New(ctx, st, session.User("name a prime"))
	if err != nil {
		t.Fatal(err)
	}
	var ends []session.ID
	for _, answer := range []string{"7", "8"} {
		f, err := root.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e, err := f.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant(answer)},
			Producer: session.Producer{Run: "run-p", Agent: "a", Model: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, e.ID())
	}
	_, errOut = run(1, append([]string{"label", ends[0].String(), "--score", "1"}, server...)...)
	if !strings.Contains(errOut, "403") && !strings.Contains(errOut, "scope") {
		t.Errorf("read token labeling: %s", errOut)
	}
	run(2, append([]string{"label", ends[0].String()}, admin...)...)
	run(0, append([]string{"label", ends[0].String(), "--score", "1", "--by", "verifier"}, admin...)...)
	run(0, "label", ends[1].String(), "--score", "0", "--by", "verifier", "--store", storeURL)
	pairsAPI, _ := run(0, append([]string{"export", "pairs", "--run", "run-p"}, server...)...)
	pairsStore, _ := run(0, "export", "pairs", "--run", "run-p", "--store", storeURL)
	if pairsAPI != pairsStore || strings.Count(pairsAPI, "\n") != 1 {
		t.Fatalf("pairs through the coordinator:\n%s\nfrom the store:\n%s", pairsAPI, pairsStore)
	}
	var pair trainset.Pair
	if err := json.Unmarshal([]byte(pairsAPI), &pair); err != nil || pair.Provenance.Chosen.VersionID != ends[0] || *pair.Rejected[0].Content != "8" ||
		pair.Provenance.Source != trainset.FromScores {
		t.Fatalf("pair %s: %v", pairsAPI, err)
	}
	// Scores by "verifier" are the scores source: --from scores keeps the
	// pair, --from labels (a person's labels) has none, both ways.
	if out, _ := run(0, append([]string{"export", "pairs", "--run", "run-p", "--from", "scores"}, server...)...); out != pairsAPI {
		t.Errorf("--from scores: %s", out)
	}
	for _, where := range [][]string{server, {"--store", storeURL}} {
		if out, _ := run(0, append([]string{"export", "pairs", "--run", "run-p", "--from", "labels,approval,selector"}, where...)...); out != "" {
			t.Errorf("--from labels,approval,selector %v: %s", where[0], out)
		}
		if _, errOut := run(2, append([]string{"export", "pairs", "--from", "votes"}, where...)...); !strings.Contains(errOut, "--from") ||
			!strings.Contains(errOut, `"votes"`) {
			t.Errorf("--from votes %v: %s", where[0], errOut)
		}
	}
	// The labels did not become trajectories.
	if out, _ := run(0, append([]string{"export", "trajectories", "--run", "run-p", "--quiet"}, server...)...); strings.Count(out, "\n") != 2 {
		t.Errorf("trajectories of run-p:\n%s", out)
	}

	// The coordinator refuses a bad request before streaming anything,
	// naming the field.
	cl, err := client.New(srv.URL, read)
	if err != nil {
		t.Fatal(err)
	}
	for field, req := range map[string]api.ExportTrajectoriesRequest{
		"format": {Format: "csv"}, "redacted": {Redacted: "keep"}, "after": {After: "nope"},
	} {
		var sink strings.Builder
		_, err := cl.ExportTrajectories(ctx, req, &sink, nil)
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, field) || sink.Len() != 0 {
			t.Errorf("%s: %v (wrote %q)", field, err, sink.String())
		}
	}
	if _, err := cl.ExportPairs(ctx, api.ExportPairsRequest{Redacted: "keep"}, &strings.Builder{}, nil); err == nil || !strings.Contains(err.Error(), "redacted") {
		t.Errorf("pairs with a bad redacted: %v", err)
	}
	if _, err := cl.ExportPairs(ctx, api.ExportPairsRequest{From: []string{"votes"}}, &strings.Builder{}, nil); err == nil || !strings.Contains(err.Error(), "from") {
		t.Errorf("pairs from votes: %v", err)
	}

	// --where: store only.
	if out, _ := run(0, "export", "trajectories", "--store", storeURL, "--quiet", "--where", "v.run = 'run-p'"); strings.Count(out, "\n") != 2 {
		t.Errorf("--where v.run = 'run-p':\n%s", out)
	}
	run(2, append([]string{"export", "trajectories", "--where", "1=1"}, server...)...)
	run(2, "export", "trajectories", "--store", storeURL, "--where", "1=1; DELETE FROM versions")

	// Bad flags are usage errors naming the flag.
	for _, bad := range [][]string{{"--format", "csv"}, {"--redacted", "keep"}, {"--after", "nope"}, {"--since", "yesterday"}} {
		_, errOut := run(2, append(append([]string{"export", "trajectories"}, bad...), server...)...)
		if !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: %s", bad, errOut)
		}
	}
}
