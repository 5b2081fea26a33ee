package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// TestSessionImportOpenRath imports every OpenRath fixture as a user types
// it, into a store (--store) and through a coordinator on Postgres, whose
// default sandbox policy refuses the "local" placement fixture a was
// recorded with (--server), and checks each against its .expected.json.
func TestSessionImportOpenRath(t *testing.T) {
	t.Parallel()
	fx := testenv.OpenRathFixtures(t)
	t.Run("store", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		graph := func(name string) []string {
			return []string{"--store", "sqlite:" + filepath.Join(dir, name+".db")}
		}
		for _, name := range []string{"rath", "other"} {
			if code, _, errOut := rathctl(t, "", with(graph(name), "migrate")...); code != 0 {
				t.Fatalf("migrate: %s", errOut)
			}
		}
		importOpenRath(t, fx, graph)
	})
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		servers := map[string]string{}
		for _, name := range []string{"rath", "other"} {
			d, err := app.StartDev(context.Background(), app.DevConfig{
				Dir: filepath.Join(dir, name), Addr: "127.0.0.1:0", Workers: -1, StoreURL: testdb.Postgres(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close)
			servers[name] = d.URL
		}
		importOpenRath(t, fx, func(name string) []string { return []string{"--server", servers[name]} })
	})
}

func readFixtureJSON(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// sameJSON compares two values by their JSON forms.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	norm := func(v any) any {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		t.Fatalf("%s:\n got %s\nwant %s", what, gb, wb)
	}
}

// exported runs session export --format openrath and returns its lines,
// decoded.
func exported(t *testing.T, g []string, id string) (raw []byte, lines []map[string]any) {
	t.Helper()
	code, out, errOut := rathctl(t, "", with(g, "session", "export", id, "--format", "openrath")...)
	if code != 0 {
		t.Fatalf("export %s --format openrath: exit %d: %s", id, code, errOut)
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("export %s: line %q: %v", id, l, err)
		}
		lines = append(lines, m)
	}
	return []byte(out), lines
}

type shownVersion struct {
	Version    store.Info      `json:"version"`
	Transcript []session.Chunk `json:"transcript"`
}

func chunkKinds(cs []session.Chunk) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, string(c.Kind()))
	}
	return out
}

// persistedExpect is one case of persisted*.expected.json.
type persistedExpect struct {
	File      string `json:"file"`
	SessionID string `json:"session_id"`
	Loader    struct {
		Closed          bool            `json:"closed"`
		ChunkCount      int             `json:"chunk_count"`
		ChunkKinds      []string        `json:"chunk_kinds"`
		CumulativeUsage *session.Usage  `json:"cumulative_usage"`
		Header          map[string]any  `json:"header"`
		TrailerRaw      json.RawMessage `json:"trailer_raw"`
	} `json:"loader"`
}

// checkTranscript checks one imported transcript against its expected
// loader result, and that exporting it as OpenRath gives the file back
// (without a torn last line, which import drops).
func checkTranscript(t *testing.T, fx string, g []string, id string, c persistedExpect) {
	t.Helper()
	var shown shownVersion
	okJSON(t, &shown, with(g, "session", "show", id)...)
	v := shown.Version
	if v.Op != session.OpImport || len(v.Parents) != 0 || v.Key != "" || v.Placement.Backend != "" || !v.Placement.Spec.IsZero() {
		t.Fatalf("%s: version = %+v, want a root import with no key and no placement", c.File, v)
	}
	if v.Len != c.Loader.ChunkCount || !slices.Equal(chunkKinds(shown.Transcript), c.Loader.ChunkKinds) {
		t.Fatalf("%s: len %d kinds %v, want %d %v", c.File, v.Len, chunkKinds(shown.Transcript), c.Loader.ChunkCount, c.Loader.ChunkKinds)
	}
	wantUsage := session.Usage{}
	if c.Loader.CumulativeUsage != nil {
		wantUsage = *c.Loader.CumulativeUsage
	}
	if v.Usage != wantUsage {
		t.Fatalf("%s: usage %+v, want %+v", c.File, v.Usage, wantUsage)
	}

	raw, lines := exported(t, g, id)
	header := lines[0]
	if header["record_type"] != "header" {
		t.Fatalf("%s: export line 1 = %v", c.File, header)
	}
	delete(header, "record_type")
	sameJSON(t, c.File+": exported header", header, c.Loader.Header)
	last := lines[len(lines)-1]
	if c.Loader.Closed {
		sameJSON(t, c.File+": exported trailer", last, c.Loader.TrailerRaw)
	} else if last["record_type"] == "trailer" {
		t.Fatalf("%s: a partial transcript exported with a trailer", c.File)
	}
	orig, err := os.ReadFile(filepath.Join(fx, c.File))
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(orig, '\n'); i >= 0 {
		orig = orig[:i+1] // drop a torn last line
	}
	if !bytes.Equal(raw, orig) {
		t.Fatalf("%s: export --format openrath does not give the file back:\n got %s\nwant %s", c.File, raw, orig)
	}
}

func importOpenRath(t *testing.T, fx string, graph func(name string) []string) {
	g := graph("rath")

	// A sessions directory: every transcript, partial and torn ones
	// included, in list_persisted_sessions order.
	var exp struct {
		Cases     map[string]persistedExpect `json:"cases"`
		SessionsL []struct {
			ID string `json:"id"`
		} `json:"list_persisted_sessions"`
		Separate map[string]persistedExpect `json:"cases_separate_dir"`
	}
	readFixtureJSON(t, filepath.Join(fx, "persisted.expected.json"), &exp)
	var infos []store.Info
	okJSON(t, &infos, with(g, "session", "import", filepath.Join(fx, "sessions"))...)
	var got, want []string
	for _, in := range infos {
		got = append(got, in.ID.String())
	}
	for _, s := range exp.SessionsL {
		want = append(want, s.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("import sessions/: %v, want %v", got, want)
	}
	for name, c := range exp.Cases {
		t.Run(name, func(t *testing.T) { checkTranscript(t, fx, g, c.SessionID, c) })
		// Each file alone, as a user would type it: already imported, so a
		// no-op that prints the same version.
		var one store.Info
		okJSON(t, &one, with(g, "session", "import", filepath.Join(fx, c.File))...)
		if one.ID.String() != c.SessionID {
			t.Fatalf("import %s = %s", c.File, one.ID)
		}
	}

	// A transcript cut inside a UTF-8 character (OpenRath itself cannot
	// read it): the torn line is dropped, with a warning.
	for _, c := range exp.Separate {
		code, out, errOut := rathctl(t, "", with(g, "session", "import", filepath.Join(fx, c.File))...)
		if code != 0 || !strings.Contains(out, c.SessionID+"  import  len=1") || !strings.Contains(errOut, "dropped an unterminated last line") {
			t.Fatalf("import %s: exit %d\n%s\n%s", c.File, code, out, errOut)
		}
	}

	// A transcript written by OpenRath's session loop, as a directory and
	// on stdin.
	var loop struct {
		File     string          `json:"file"`
		Loader   persistedExpect `json:"-"`
		InMemory struct {
			ID string `json:"id"`
		} `json:"in_memory_out"`
	}
	readFixtureJSON(t, filepath.Join(fx, "persisted_loop.expected.json"), &loop)
	var lc persistedExpect
	readFixtureJSON(t, filepath.Join(fx, "persisted_loop.expected.json"), &lc)
	lc.SessionID = loop.InMemory.ID
	lc.File = loop.File
	okJSON(t, &infos, with(g, "session", "import", filepath.Join(fx, "sessions_loop"))...)
	if len(infos) != 1 || infos[0].ID.String() != lc.SessionID {
		t.Fatalf("import sessions_loop/ = %+v", infos)
	}
	b, err := os.ReadFile(filepath.Join(fx, loop.File))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := rathctl(t, string(b), with(graph("other"), "session", "import", "-")...); code != 0 || !strings.HasPrefix(out, lc.SessionID+"  import  len=7") {
		t.Fatalf("import - (loop transcript): exit %d %q %s", code, out, errOut)
	}
	lc.Loader.Header = nil // the loop case records the header only in the file
	checkLoop(t, fx, g, lc)

	// Lineage: one version per record, in-file parents as graph parents,
	// everything else back out through the OpenRath export.
	var lin struct {
		Sessions []struct {
			ID              string          `json:"id"`
			Parents         []string        `json:"parent_session_ids"`
			Operator        string          `json:"lineage_operator"`
			Kind            string          `json:"lineage_kind"`
			Extras          json.RawMessage `json:"lineage_extras"`
			ChunkCount      int             `json:"chunk_count"`
			CumulativeUsage *session.Usage  `json:"cumulative_usage"`
		} `json:"sessions"`
	}
	readFixtureJSON(t, filepath.Join(fx, "lineage_rich.expected.json"), &lin)
	okJSON(t, &infos, with(g, "session", "import", filepath.Join(fx, "lineage_rich.jsonl"))...)
	if len(infos) != len(lin.Sessions) {
		t.Fatalf("import lineage_rich.jsonl: %d versions, want %d", len(infos), len(lin.Sessions))
	}
	for i, s := range lin.Sessions {
		in := infos[i]
		var parents []string
		for _, p := range in.Parents {
			parents = append(parents, p.String())
		}
		if in.ID.String() != s.ID || !slices.Equal(parents, s.Parents) || in.Key != "" {
			t.Fatalf("lineage record %d: %+v, want %s parents %v", i, in, s.ID, s.Parents)
		}
		wantUsage := session.Usage{}
		if s.CumulativeUsage != nil {
			wantUsage = *s.CumulativeUsage
		}
		if in.Usage != wantUsage {
			t.Fatalf("lineage record %d: usage %+v, want %+v", i, in.Usage, wantUsage)
		}
		_, lines := exported(t, g, s.ID)
		h := lines[0]
		sameJSON(t, s.ID+": exported lineage", []any{h["parent_session_ids"], h["lineage_operator"], h["lineage_kind"], h["lineage_extras"]},
			[]any{s.Parents, s.Operator, s.Kind, s.Extras})
		// chunk_count has no transcript behind it; it is kept as an extra.
		code, out, errOut := rathctl(t, "", with(g, "session", "export", s.ID)...)
		if code != 0 || !strings.Contains(out, `["openrath.chunk_count",`+jsonInt(s.ChunkCount)+`]`) {
			t.Fatalf("export %s: exit %d %s: no chunk_count %d in\n%s", s.ID, code, errOut, s.ChunkCount, out)
		}
	}

	// Example 02's journal: four rows whose root is not in the file.
	code, out, errOut := rathctl(t, "", with(g, "session", "import", filepath.Join(fx, "lineage_demo.jsonl"))...)
	if code != 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("import lineage_demo.jsonl: exit %d\n%s%s", code, out, errOut)
	}
	var ops []any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		_, lines := exported(t, g, strings.Fields(l)[0])
		ops = append(ops, lines[0]["lineage_operator"])
	}
	sameJSON(t, "lineage_demo operators", ops, []string{"Session.fork", "Session.fork", "Session.detach", "Session.fork"})

	// Round trip of a session Rath made: export as OpenRath, import that
	// into another graph, same transcript.
	var root store.Info
	okJSON(t, &root, with(g, "session", "new", "--system", "be brief", "--user", "héllo 🌏")...)
	var a store.Info
	okJSON(t, &a, with(g, "session", "append", root.ID.String(), "--assistant", "hi")...)
	raw, _ := exported(t, g, a.ID.String())
	var orig, back shownVersion
	okJSON(t, &orig, with(g, "session", "show", a.ID.String())...)
	var imported store.Info
	code, out, errOut = rathctl(t, string(raw), with(graph("other"), "session", "import", "-", "--format", "openrath-transcript", "-o", "json")...)
	if code != 0 || json.Unmarshal([]byte(out), &imported) != nil {
		t.Fatalf("import exported transcript: exit %d %q %s", code, out, errOut)
	}
	okJSON(t, &back, with(graph("other"), "session", "show", imported.ID.String())...)
	sameJSON(t, "round trip transcript", back.Transcript, orig.Transcript)
	raw2, _ := exported(t, graph("other"), imported.ID.String())
	if !bytes.Equal(raw, raw2) {
		t.Fatalf("export → import → export changed the transcript:\n%s\n%s", raw, raw2)
	}
}

func checkLoop(t *testing.T, fx string, g []string, c persistedExpect) {
	t.Helper()
	var shown shownVersion
	okJSON(t, &shown, with(g, "session", "show", c.SessionID)...)
	if shown.Version.Len != c.Loader.ChunkCount || !slices.Equal(chunkKinds(shown.Transcript), c.Loader.ChunkKinds) ||
		shown.Version.Usage != *c.Loader.CumulativeUsage {
		t.Fatalf("loop transcript: %+v %v, want %+v", shown.Version, chunkKinds(shown.Transcript), c.Loader)
	}
	raw, lines := exported(t, g, c.SessionID)
	if lines[0]["lineage_operator"] != "run_session_loop" || lines[0]["lineage_kind"] != "op_session_loop" {
		t.Fatalf("loop header = %v", lines[0])
	}
	orig, err := os.ReadFile(filepath.Join(fx, c.File))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, orig) {
		t.Fatalf("loop transcript does not export back to its file")
	}
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestSessionImportDetectsFormat: each format is detected from its first
// record (also on stdin, and after blank lines), --format forces one, and
// anything else is refused with the line named.
func TestSessionImportDetectsFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := []string{"--store", "sqlite:" + filepath.Join(dir, "src.db")}
	g := []string{"--store", "sqlite:" + filepath.Join(dir, "rath.db")}
	for _, st := range [][]string{src, g} {
		if code, _, errOut := rathctl(t, "", with(st, "migrate")...); code != 0 {
			t.Fatalf("migrate: %s", errOut)
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var root store.Info
	okJSON(t, &root, with(src, "session", "new", "--user", "hello")...)
	_, rathJSONL, _ := rathctl(t, "", with(src, "session", "export", root.ID.String())...)
	_, rootTranscript, _ := rathctl(t, "", with(src, "session", "export", root.ID.String(), "--format", "openrath")...)
	var other store.Info
	okJSON(t, &other, with(src, "session", "new", "--user", "hello again")...)
	_, transcript, _ := rathctl(t, "", with(src, "session", "export", other.ID.String(), "--format", "openrath")...)
	lineage := `{"id": "ca35f46c-12a1-4cf0-b410-d2376ab4728d", "parent_session_ids": [], "lineage_operator": "Session.create", "lineage_kind": "leaf_user", "lineage_extras": [], "chunk_count": 1, "cumulative_usage": null}` + "\n"

	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		out, errOut string
	}{
		{"transcript", transcript, []string{"-"}, 0, other.ID.String() + "  import", ""},
		{"rath", rathJSONL, []string{"-"}, 0, root.ID.String() + "  create", ""},
		{"rath after blank lines", "\n  \n" + rathJSONL, []string{"-"}, 0, root.ID.String() + "  create", ""},
		{"the transcript of a version in the graph", rootTranscript, []string{"-"}, 1, "", "conflicting version"},
		{"lineage", lineage, []string{"-"}, 0, "ca35f46c-12a1-4cf0-b410-d2376ab4728d  create  len=0", ""},
		{"forced lineage", lineage, []string{"-", "--format", "openrath-lineage"}, 0, "ca35f46c", ""},
		{"forced rath on a transcript", transcript, []string{"-", "--format", "rath"}, 1, "", `record has no "record" field`},
		{"forced transcript on lineage", lineage, []string{"-", "--format", "openrath-transcript"}, 1, "", "line 1"},
		{"garbage", "hello world\n", []string{"-"}, 1, "", "line 1: not Rath session JSONL, an OpenRath transcript or OpenRath lineage JSONL"},
		{"garbage after a blank line", "\n{\"foo\": 1}\n", []string{"-"}, 1, "", `line 2: not Rath session JSONL, an OpenRath transcript or OpenRath lineage JSONL: the first record has keys [foo]`},
		{"a JSON array", "[1,2]\n", []string{"-"}, 1, "", "line 1: not Rath session JSONL"},
		{"empty", "", []string{"-"}, 1, "", "the input is empty"},
		{"unknown format", rathJSONL, []string{"-", "--format", "yaml"}, 2, "", `--format must be auto, rath, openrath-transcript or openrath-lineage, not "yaml"`},
		{"a directory as rath", "", []string{dir, "--format", "rath"}, 2, "", "only --format openrath-transcript reads directories"},
		{"a directory without transcripts", "", []string{empty}, 1, "", "no readable OpenRath transcripts"},
		{"a bad transcript", "", []string{write("bad.jsonl", "{\"record_type\": \"header\", \"schema_version\": 1}\n{\"record_type\": \"chunk\"}\n")}, 1, "", "(openrath-transcript)"},
	} {
		code, out, errOut := rathctl(t, tc.stdin, with(g, append([]string{"session", "import"}, tc.args...)...)...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.errOut) {
			t.Errorf("%s: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", tc.name, code, tc.code, out, tc.out, errOut, tc.errOut)
		}
	}
	// A directory with a damaged transcript beside a good one: the good one
	// is imported, the damaged one skipped with a warning naming it.
	mixed := filepath.Join(dir, "mixed")
	if err := os.Mkdir(mixed, 0o700); err != nil {
		t.Fatal(err)
	}
	good := other.ID.String()
	if err := os.WriteFile(filepath.Join(mixed, good+".jsonl"), []byte(transcript), 0o600); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(mixed, "0199a3a4-7d5c-7000-8000-000000000000.jsonl")
	if err := os.WriteFile(damaged, []byte("{\"record_type\": \"chunk\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := rathctl(t, "", with(g, "session", "import", mixed)...)
	if code != 0 || !strings.HasPrefix(out, good+"  import") || !strings.Contains(errOut, "skipped "+damaged+": line 1") {
		t.Errorf("import a directory with a damaged file: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut := rathctl(t, "", with(g, "session", "export", root.ID.String(), "--format", "svg")...); code != 2 || !strings.Contains(errOut, "--format must be rath or openrath") {
		t.Errorf("export --format svg: exit %d %s", code, errOut)
	}
}
