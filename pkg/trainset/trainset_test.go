package trainset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
	"github.com/rath-run/rath/pkg/trainset"
)

func openStore(t *testing.T) (store.Store, string) {
	t.Helper()
	url := "sqlite:" + filepath.Join(t.TempDir(), "rath.db")
	st, err := storeurl.Open(context.Background(), url, storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, url
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func call(id, name, args string) session.ToolCall {
	return session.ToolCall{ID: id, Function: session.FunctionCall{Name: name, Arguments: args}}
}

// step records what a worker's step records: chunks, usage and producer.
func step(t *testing.T, s session.Session, run, agent string, chunks ...session.Chunk) session.Session {
	t.Helper()
	return must[session.Session](t)(s.Extend(context.Background(), session.Extension{
		Op: session.OpStep, Chunks: chunks,
		Usage:    session.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
		Producer: session.Producer{Run: run, Agent: agent, Model: "scripted-1"},
	}))
}

func export(t *testing.T, st store.Store, sel trainset.Selector, opts trainset.Options) ([]trainset.OpenAIRecord, trainset.Stats) {
	t.Helper()
	var buf bytes.Buffer
	stats, err := trainset.Export(context.Background(), st, sel, opts, &buf)
	if err != nil {
		t.Fatal(err)
	}
	var recs []trainset.OpenAIRecord
	if opts.Format == "" || opts.Format == trainset.FormatOpenAI {
		if err := trainset.ReadOpenAI(&buf, func(r trainset.OpenAIRecord) error { recs = append(recs, r); return nil }); err != nil {
			t.Fatalf("strict reader refused the export: %v", err)
		}
	}
	return recs, stats
}

// TestExportTrajectoriesPerBranch: a run that stepped a session twice and
// forked it into two branches exports one record per branch end (not per
// step), each strict-valid, with provenance whose hash `rathctl verify`
// recomputes.
func TestExportTrajectoriesPerBranch(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	root := must[session.Session](t)(session.New(ctx, st, session.System("be terse"), session.User("list the files")))
	s1 := step(t, root, "run-1", "coder",
		session.Assistant("", call("c1", "ls", `{"dir":"."}`)),
		session.ToolResultChunk(session.ToolResult{ToolCallID: "c1", Name: "ls", Content: `["a.go"]`}),
		session.Assistant("a.go"))
	s2 := step(t, s1, "run-1", "coder", session.User("and tests?"), session.Assistant("none"))
	fa := must[session.Session](t)(s2.Fork(ctx))
	fb := must[session.Session](t)(s2.Fork(ctx))
	a := step(t, fa, "run-1", "coder", session.User("sure?"), session.Assistant("yes"))
	b := step(t, fb, "run-1", "coder", session.User("sure?"), session.Assistant("let me check"))
	other := step(t, root, "run-2", "other", session.Assistant("ignored"))

	tools := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"ls","parameters":{"type":"object"}}}`)}
	recs, stats := export(t, st, trainset.Selector{Run: "run-1"}, trainset.Options{Tools: tools})
	// s2 has forks as children, but forks are not in run-1: s2 is an end
	// only if no selected child extends it. Forks are not selected, so s2
	// is exported too (its transcript is a prefix of both branches' ones).
	got := map[session.ID]trainset.OpenAIRecord{}
	for _, r := range recs {
		got[r.Provenance.VersionID] = r
	}
	for _, want := range []session.Session{a, b, s2} {
		if _, ok := got[want.ID()]; !ok {
			t.Errorf("no record for %s (got %d records, stats %+v)", want.ID(), len(recs), stats)
		}
	}
	if _, ok := got[s1.ID()]; ok {
		t.Errorf("s1 is extended by s2 in the same run: exported anyway")
	}
	if _, ok := got[other.ID()]; ok {
		t.Errorf("run-2's version exported with --run run-1")
	}
	ra := got[a.ID()]
	if n := len(ra.Messages); n != 9 || ra.Messages[2].ToolCalls[0].ID != "c1" || ra.Messages[3].Role != "tool" || *ra.Messages[8].Content != "yes" {
		t.Errorf("branch a messages: %+v", ra.Messages)
	}
	if len(ra.Tools) != 1 || ra.Provenance.Run != "run-1" || ra.Provenance.Agent != "coder" || ra.Provenance.Model != "scripted-1" || ra.Provenance.Usage.TotalTokens != 45 {
		t.Errorf("branch a tools/provenance: %+v %+v", ra.Tools, ra.Provenance)
	}
	// Provenance: the version's hash, recomputed from the stored rows.
	for _, r := range recs {
		rep, err := lineage.Verify(ctx, st, r.Provenance.VersionID)
		if err != nil {
			t.Fatalf("verify %s: %v (%v)", r.Provenance.VersionID, err, rep.Problems)
		}
		v := must[*session.Version](t)(st.Get(ctx, r.Provenance.VersionID))
		if v.Hash != r.Provenance.Hash {
			t.Errorf("%s: provenance hash %s, stored %s", v.ID, r.Provenance.Hash, v.Hash)
		}
	}
	// Agent filter.
	if recs, _ := export(t, st, trainset.Selector{Agent: "other"}, trainset.Options{}); len(recs) != 1 || recs[0].Provenance.VersionID != other.ID() {
		t.Errorf("--agent other: %d records", len(recs))
	}
}

// TestExportRedaction: a redacted tool result never reaches an export.
// drop-record skips the record; drop-chunk drops the chunk and the tool
// call it answered, and the record stays strict-valid; the OpenRath format
// drops it too.
func TestExportRedaction(t *testing.T) {
	ctx := context.Background()
	st, url := openStore(t)
	_, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dialect := must[lineage.Dialect](t)(lineage.DialectOf(url))
	ret := lineage.Retention{DB: db, Dialect: dialect}
	root := must[session.Session](t)(session.New(ctx, st, session.User("pay the invoice")))
	s := step(t, root, "run-r", "payer",
		session.Assistant("checking", call("c_pay", "wire", `{"iban":"DE00SECRET"}`), call("c_ok", "status", `{}`)),
		session.ToolResultChunk(session.ToolResult{ToolCallID: "c_pay", Name: "wire", Content: `{"iban":"DE00SECRET"}`}),
		session.ToolResultChunk(session.ToolResult{ToolCallID: "c_ok", Name: "status", Content: `"up"`}),
		session.Assistant("paid"))
	if _, err := ret.Redact(ctx, s.ID(), 2, "bank details"); err != nil {
		t.Fatal(err)
	}
	recs, stats := export(t, st, trainset.Selector{Run: "run-r"}, trainset.Options{})
	if len(recs) != 0 || stats.Redacted != 1 {
		t.Fatalf("drop-record: %d records, stats %+v", len(recs), stats)
	}
	recs, _ = export(t, st, trainset.Selector{Run: "run-r"}, trainset.Options{Redacted: trainset.DropChunk})
	if len(recs) != 1 {
		t.Fatalf("drop-chunk: %d records", len(recs))
	}
	line := must[[]byte](t)(json.Marshal(recs[0]))
	if bytes.Contains(line, []byte("SECRET")) || bytes.Contains(line, []byte("c_pay")) || bytes.Contains(line, []byte("rath_redacted")) {
		t.Errorf("drop-chunk record still holds the redacted call: %s", line)
	}
	if !bytes.Contains(line, []byte("c_ok")) {
		t.Errorf("drop-chunk dropped the unredacted call too: %s", line)
	}
	var buf bytes.Buffer
	if _, err := trainset.Export(ctx, st, trainset.Selector{Run: "run-r"}, trainset.Options{Format: trainset.FormatOpenRath, Redacted: trainset.DropChunk}, &buf); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.Contains(out, "SECRET") || strings.Contains(out, "c_pay") || !strings.Contains(out, `"episode_id":"`+s.ID().String()) {
		t.Errorf("openrath drop-chunk: %s", out)
	}
}

// TestExportResume: stopping after any record and resuming with its
// cursor writes exactly the records not yet written.
func TestExportResume(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	for i := range 7 {
		root := must[session.Session](t)(session.New(ctx, st, session.User("task")))
		step(t, root, "run-c", "a", session.Assistant(strings.Repeat("x", i+1)))
	}
	all, _ := export(t, st, trainset.Selector{Run: "run-c"}, trainset.Options{PageSize: 3})
	if len(all) != 7 {
		t.Fatalf("%d records, want 7", len(all))
	}
	for i, r := range all {
		rest, _ := export(t, st, trainset.Selector{Run: "run-c"}, trainset.Options{PageSize: 3, After: r.Provenance.Cursor})
		if len(rest) != len(all)-i-1 {
			t.Fatalf("after record %d: %d records, want %d", i, len(rest), len(all)-i-1)
		}
		for j, rr := range rest {
			if rr.Provenance.VersionID != all[i+1+j].Provenance.VersionID {
				t.Fatalf("after record %d: record %d is %s, want %s", i, j, rr.Provenance.VersionID, all[i+1+j].Provenance.VersionID)
			}
		}
	}
	if _, err := trainset.Export(ctx, st, trainset.Selector{}, trainset.Options{After: "bogus"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "after") {
		t.Errorf("bogus cursor: %v", err)
	}
}

// TestExportWhere: a SQL filter over the versions table and the lineage
// views keeps only the matching ends, and cannot write.
func TestExportWhere(t *testing.T) {
	ctx := context.Background()
	st, url := openStore(t)
	for _, q := range []string{"2+2?", "capital of France?"} {
		root := must[session.Session](t)(session.New(ctx, st, session.User(q)))
		step(t, root, "run-w", "a", session.Assistant("answer to "+q))
	}
	_, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	filter, done, err := trainset.SQLFilter(ctx, db, false,
		`EXISTS (SELECT 1 FROM rath_transcript t WHERE t.version_id = v.id AND t.kind = 'user' AND json_extract(t.payload, '$.content') LIKE '%France%')`)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := export(t, st, trainset.Selector{Run: "run-w"}, trainset.Options{Filter: filter})
	if err := done(); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !strings.Contains(*recs[0].Messages[0].Content, "France") {
		t.Fatalf("where: %d records %+v", len(recs), recs)
	}
	// A filter cannot write, and a bad one names itself.
	if _, done, err := trainset.SQLFilter(ctx, db, false, "1=1; DELETE FROM versions"); err == nil {
		t.Error("a statement smuggled into --where was accepted")
		_ = done()
	}
	filter, done, err = trainset.SQLFilter(ctx, db, false, "(SELECT count(*) FROM (SELECT 1)) > 0 AND v.agent = 'a'")
	if err != nil {
		t.Fatal(err)
	}
	if recs, _ := export(t, st, trainset.Selector{Run: "run-w"}, trainset.Options{Filter: filter}); len(recs) != 2 {
		t.Errorf("where v.agent = 'a': %d records", len(recs))
	}
	if err := done(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := trainset.SQLFilter(ctx, db, false, "no_such_column = 1"); err == nil || !strings.Contains(err.Error(), "no_such_column") {
		t.Errorf("bad where: %v", err)
	}
}
