package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// richGraph builds a graph exercising every version field: appends, a step
// with usage, producer, extras and key, a placement move, forks, a merge,
// evidence chunks and a detach. It returns the graph and the head.
func richGraph(t testing.TB) (*session.MemoryGraph, session.Session) {
	t.Helper()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	chk := func(s session.Session, err error) session.Session {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	root := chk(session.New(ctx, g, session.System("be brief <ok> & \"quoted\""), session.User("héllo 🌏 \u2028 line")))
	placed := chk(root.To(ctx, session.Placement{Backend: "docker", Spec: session.Spec{
		Image: "python:3.12", Entrypoint: []string{"/bin/sh", "-c"}, Env: map[string]string{"B": "2", "A": "1"},
		TimeoutSeconds: 90.5, WorkingDir: "/ws",
	}, Snapshot: "sha256:abc"}))
	note, err := session.Evidence(session.KindNote, map[string]any{"z": 1, "a": []any{"x", 2.5}})
	if err != nil {
		t.Fatal(err)
	}
	a := chk(placed.Fork(ctx))
	a = chk(a.Extend(ctx, session.Extension{
		Op: session.OpStep,
		Chunks: []session.Chunk{
			session.Assistant("", session.ToolCall{ID: "c1", Function: session.FunctionCall{Name: "ls", Arguments: `{"path":"."}`}}),
			session.ToolResultChunk(session.ToolResult{ToolCallID: "c1", Name: "ls", Content: `{"entries":[]}`}),
			session.Assistant("done"),
			note,
		},
		Usage:    session.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
		Producer: session.Producer{Run: "run-1", Step: "step-1", Agent: "coder", Model: "m", Worker: "w1", TraceID: "t"},
		Extras:   []session.Extra{session.StringExtra("loop.truncated", "true"), {Key: "n", Value: json.RawMessage(`{"a":2,"b":[1,"x"]}`)}},
		Key:      "run-1/step-1",
	}))
	b := chk(placed.Fork(ctx))
	b = chk(b.Append(ctx, session.User("from b")))
	m := chk(a.Merge(ctx, b))
	d := chk(m.Detach(ctx))
	d = chk(d.Append(ctx, session.User("after detach")))
	return g, d
}

func export(t testing.TB, g session.Graph, id session.ID) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := session.Export(context.Background(), g, id, &buf); err != nil {
		t.Fatalf("export: %v", err)
	}
	return buf.Bytes()
}

func TestJSONLRoundTripByteForByte(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, head := richGraph(t)
	first := export(t, g, head.ID())

	lines := strings.Split(strings.TrimSuffix(string(first), "\n"), "\n")
	wantHeader := fmt.Sprintf(`{"record":"rath.session","schema_version":1,"head":"%s"}`, head.ID())
	if lines[0] != wantHeader {
		t.Fatalf("header line = %s, want %s", lines[0], wantHeader)
	}
	if got, want := len(lines)-1, len(g.Versions()); got != want {
		t.Fatalf("exported %d versions, graph holds %d (all are ancestors of head)", got, want)
	}
	// Topological: every version's parents and base come earlier.
	pos := map[string]int{}
	for i, l := range lines[1:] {
		var v session.Version
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %d: %v", i+2, err)
		}
		for _, p := range v.Parents {
			if _, ok := pos[p.String()]; !ok {
				t.Fatalf("line %d: parent %s not written before version %s", i+2, p, v.ID)
			}
		}
		if v.Base != nil {
			if _, ok := pos[v.Base.String()]; !ok {
				t.Fatalf("line %d: base %s not written before version %s", i+2, v.Base, v.ID)
			}
		}
		pos[v.ID.String()] = i
	}

	g2 := session.NewMemoryGraph()
	s2, err := session.Import(ctx, g2, bytes.NewReader(first))
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if s2.ID() != head.ID() || s2.Hash() != head.Hash() || s2.Len() != head.Len() {
		t.Fatalf("imported head %v hash %s, want %v hash %s", s2, s2.Hash(), head, head.Hash())
	}
	equal(t, texts(t, s2), texts(t, head))
	second := export(t, g2, s2.ID())
	if !bytes.Equal(first, second) {
		t.Fatalf("re-export differs:\nfirst:\n%s\nsecond:\n%s", first, second)
	}

	// Idempotent: importing again into the same graph, or into the graph it
	// came from, is accepted and changes nothing.
	n := len(g2.Versions())
	if _, err := session.Import(ctx, g2, bytes.NewReader(first)); err != nil {
		t.Fatalf("second import: %v", err)
	}
	if _, err := session.Import(ctx, g, bytes.NewReader(first)); err != nil {
		t.Fatalf("import into source graph: %v", err)
	}
	if got := len(g2.Versions()); got != n {
		t.Fatalf("second import added versions: %d, want %d", got, n)
	}
}

func TestJSONLExportSubtree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root := must(t)(session.FromUserMessage(ctx, g, "root"))
	a := must(t)(root.Append(ctx, session.Assistant("a")))
	_ = must(t)(root.Append(ctx, session.Assistant("unrelated branch")))
	out := export(t, g, a.ID())
	if n := bytes.Count(out, []byte("\n")); n != 3 {
		t.Fatalf("export of a has %d lines, want header + 2 versions:\n%s", n, out)
	}
	// A partial import: the child alone, into a graph that already has root.
	g2 := session.NewMemoryGraph()
	if _, err := session.Import(ctx, g2, bytes.NewReader(export(t, g, root.ID()))); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(out), "\n")
	childOnly := lines[0] + lines[2]
	s, err := session.Import(ctx, g2, strings.NewReader(childOnly))
	if err != nil {
		t.Fatalf("import child onto graph holding its parent: %v", err)
	}
	equal(t, texts(t, s), []string{"user:root", "assistant:a"})

	if err := session.Export(ctx, g, session.NewID(), io.Discard); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("export of unknown id: %v, want ErrNotFound", err)
	}
}

// infinite yields the same byte forever.
type infinite byte

func (b infinite) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestJSONLImportRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root := must(t)(session.FromUserMessage(ctx, g, "hello"))
	child := must(t)(root.Append(ctx, session.Assistant("world")))
	good := export(t, g, child.ID())
	lines := strings.SplitAfter(string(good), "\n") // header, root, child, ""
	if len(lines) != 4 {
		t.Fatalf("unexpected export:\n%s", good)
	}
	hdr, rootLine, childLine := lines[0], lines[1], lines[2]
	id1, id2 := session.NewID(), session.NewID()
	cyc := func(id, parent session.ID) string {
		return fmt.Sprintf(`{"record":"version","id":"%s","parents":["%s"],"base":"%s","op":"append","chunks":[],"len":0,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},"created_at":"2026-01-01T00:00:00Z","hash":"x"}`+"\n", id, parent, parent)
	}

	cases := []struct {
		name string
		in   io.Reader
		want error
		msg  string
	}{
		{"empty", strings.NewReader(""), session.ErrFormat, "no header"},
		{"malformed json", strings.NewReader(hdr + rootLine + "{\"record\":\"version\",\n"), session.ErrFormat, "line 3: "},
		{"truncated mid line", strings.NewReader(hdr + rootLine + childLine[:len(childLine)/2]), session.ErrFormat, "line 3: "},
		{"truncated no head", strings.NewReader(hdr + rootLine), session.ErrFormat, "head version " + child.ID().String() + " is not in the input"},
		{"newer schema", strings.NewReader(strings.Replace(hdr, `"schema_version":1`, `"schema_version":2`, 1) + rootLine + childLine), session.ErrFormat, "line 1: " + session.ErrFormat.Error() + ": schema_version 2 is newer"},
		{"schema zero", strings.NewReader(strings.Replace(hdr, `"schema_version":1`, `"schema_version":0`, 1)), session.ErrFormat, "line 1: "},
		{"no schema", strings.NewReader(strings.Replace(hdr, `"schema_version":1,`, ``, 1)), session.ErrFormat, "no schema_version"},
		{"huge line", io.MultiReader(strings.NewReader(hdr), infinite('a')), session.ErrTooLarge, "line 2: "},
		{"invalid utf8", strings.NewReader(hdr + strings.Replace(rootLine, "hello", "hel\xffo", 1) + childLine), session.ErrFormat, "line 2: " + session.ErrFormat.Error() + ": invalid UTF-8"},
		{"unknown chunk kind", strings.NewReader(hdr + strings.Replace(rootLine, `"kind":"user"`, `"kind":"shout"`, 1) + childLine), session.ErrInvalidChunk, "line 2: "},
		{"bad payload shape", strings.NewReader(hdr + strings.Replace(rootLine, `"content":"hello"`, `"content":"hello","extra":1`, 1) + childLine), session.ErrInvalidChunk, "line 2: "},
		{"unknown record", strings.NewReader(hdr + `{"record":"comment"}` + "\n" + rootLine + childLine), session.ErrFormat, `line 2: ` + session.ErrFormat.Error() + `: unknown record type "comment"`},
		{"unknown field", strings.NewReader(hdr + strings.Replace(rootLine, `"op":"create"`, `"op":"create","shade":"red"`, 1) + childLine), session.ErrFormat, "line 2: "},
		{"hash mismatch", strings.NewReader(hdr + rootLine + strings.Replace(childLine, "world", "w0rld", 1)), session.ErrHashMismatch, "line 3: version " + child.ID().String() + ": "},
		{"cycle", strings.NewReader(fmt.Sprintf(`{"record":"rath.session","schema_version":1,"head":"%s"}`+"\n", id1) + cyc(id1, id2) + cyc(id2, id1)), session.ErrCycle, "line "},
		{"absent parent", strings.NewReader(hdr + childLine), session.ErrNotFound, "line 2: version " + child.ID().String() + ": parent " + root.ID().String() + " is neither"},
		{"out of order", strings.NewReader(hdr + childLine + rootLine), session.ErrFormat, "line 2: version " + child.ID().String() + ": " + session.ErrFormat.Error() + ": parent " + root.ID().String() + " comes later, on line 3"},
		{"version before header", strings.NewReader(rootLine + hdr), session.ErrFormat, "line 1: "},
		{"two headers", strings.NewReader(hdr + hdr + rootLine + childLine), session.ErrFormat, "line 2: " + session.ErrFormat.Error() + ": second header"},
		{"duplicate version", strings.NewReader(hdr + rootLine + rootLine + childLine), session.ErrFormat, "line 3: " + session.ErrFormat.Error() + ": version " + root.ID().String() + " already appeared on line 2"},
		{"not an object", strings.NewReader(hdr + "[1,2]\n"), session.ErrFormat, "line 2: "},
		{"no record field", strings.NewReader(hdr + "{}\n"), session.ErrFormat, "line 2: "},
		{"unknown op", strings.NewReader(hdr + strings.Replace(rootLine, `"op":"create"`, `"op":"teleport"`, 1) + childLine), session.ErrInvalidVersion, "line 2: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := session.Import(ctx, session.NewMemoryGraph(), tc.in)
			if err == nil {
				t.Fatalf("import succeeded, want %v", tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %q does not wrap %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not contain %q", err, tc.msg)
			}
		})
	}

	t.Run("conflicting id", func(t *testing.T) {
		t.Parallel()
		// The same id already holds a different version in the target graph.
		other := session.NewMemoryGraph()
		if _, err := session.Import(ctx, other, strings.NewReader(hdr+rootLine+childLine)); err != nil {
			t.Fatal(err)
		}
		forged := strings.Replace(string(good), root.Hash(), strings.Repeat("0", 64), 1)
		_, err := session.Import(ctx, other, strings.NewReader(forged))
		if !errors.Is(err, session.ErrConflict) || !strings.Contains(err.Error(), "line 2: ") {
			t.Fatalf("import over a different version with the same id: %v, want ErrConflict on line 2", err)
		}
	})
}

// nonCanonicalExtras are extra values as callers build them: unsorted keys,
// spaces, HTML escaping from json.Marshal, an empty value.
func nonCanonicalExtras(t testing.TB) []session.Extra {
	t.Helper()
	html, err := json.Marshal(map[string]string{"q": "<a & b>"})
	if err != nil {
		t.Fatal(err)
	}
	return []session.Extra{
		{Key: "unsorted", Value: json.RawMessage(`{"b":1,"a":2}`)},
		{Key: "spaced", Value: json.RawMessage(" [ 1 , {\"y\" : true, \"x\": null} ] ")},
		{Key: "html", Value: html},
		{Key: "empty"},
		{Key: "number", Value: json.RawMessage(`1.50e+3`)},
	}
}

// TestNonCanonicalExtraRoundTrips: an extra given in non-canonical JSON is
// canonicalised when the version is sealed, so the hash verifies after an
// export and import.
func TestNonCanonicalExtraRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root := must(t)(session.FromUserMessage(ctx, g, "x"))
	given := nonCanonicalExtras(t)
	orig := slices.Clone(given)
	s := must(t)(root.Extend(ctx, session.Extension{Extras: given}))
	for i := range given {
		if !bytes.Equal(given[i].Value, orig[i].Value) {
			t.Fatalf("sealing modified the caller's extra %q", given[i].Key)
		}
	}
	if got := string(s.Version().Extras[0].Value); got != `{"a":2,"b":1}` {
		t.Fatalf("sealed extra = %s, want canonical", got)
	}
	if got := string(s.Version().Extras[3].Value); got != "null" {
		t.Fatalf("sealed empty extra = %q, want null", got)
	}
	out := export(t, g, s.ID())
	got, err := session.Import(ctx, session.NewMemoryGraph(), bytes.NewReader(out))
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if got.Hash() != s.Hash() {
		t.Fatalf("imported hash %s, want %s", got.Hash(), s.Hash())
	}
	if fmt.Sprint(got.Version().Extras) != fmt.Sprint(s.Version().Extras) {
		t.Fatalf("imported extras %v, want %v", got.Version().Extras, s.Version().Extras)
	}
}

// TestUnsealedNonCanonicalExtraRefused: a version built by hand with a
// non-canonical extra is refused by Put, naming the extra.
func TestUnsealedNonCanonicalExtraRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	v := &session.Version{ID: session.NewID(), Op: session.OpCreate, Chunks: []session.Chunk{session.User("x")},
		Extras: []session.Extra{{Key: "k", Value: json.RawMessage(`{"b":1,"a":2}`)}}, CreatedAt: time.Now(), Len: 1}
	v.Hash = v.ComputeHash(nil, "")
	_, err := g.Put(ctx, v)
	if !errors.Is(err, session.ErrInvalidVersion) || !strings.Contains(err.Error(), `extra "k"`) {
		t.Fatalf("put of an unsealed non-canonical extra: %v, want ErrInvalidVersion naming the extra", err)
	}
	bad := &session.Version{ID: session.NewID(), Op: session.OpCreate, Extras: []session.Extra{{Key: "j", Value: json.RawMessage(`{nope`)}}, CreatedAt: time.Now()}
	if err := session.Seal(bad, nil, nil); !errors.Is(err, session.ErrInvalidVersion) || !strings.Contains(err.Error(), `extra "j"`) {
		t.Fatalf("seal of an extra that is not JSON: %v, want ErrInvalidVersion naming the extra", err)
	}
}

// FuzzExtraRoundTrip: any JSON value given as an extra seals, exports and
// imports to the same hash and the same canonical value.
func FuzzExtraRoundTrip(f *testing.F) {
	for _, e := range nonCanonicalExtras(f) {
		f.Add(e.Key, []byte(e.Value))
	}
	f.Add("s", []byte(`"\u003c\u2028\ud83c\udf0f"`))
	f.Add("deep", []byte(`{"z":{"y":[{"b":1,"a":0}]}, "a":-0.0}`))
	f.Add("bad", []byte(`{"a":`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		ctx := context.Background()
		g := session.NewMemoryGraph()
		root, err := session.FromUserMessage(ctx, g, "x")
		if err != nil {
			t.Fatal(err)
		}
		s, err := root.Extend(ctx, session.Extension{Extras: []session.Extra{{Key: key, Value: value}}})
		if err != nil {
			if !errors.Is(err, session.ErrInvalidVersion) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		out := export(t, g, s.ID())
		got, err := session.Import(ctx, session.NewMemoryGraph(), bytes.NewReader(out))
		if err != nil {
			t.Fatalf("import of a sealed extra %q: %v\n%s", value, err, out)
		}
		if got.Hash() != s.Hash() {
			t.Fatalf("extra %q: imported hash %s, want %s", value, got.Hash(), s.Hash())
		}
		if a, b := got.Version().Extras[0].Value, s.Version().Extras[0].Value; !bytes.Equal(a, b) {
			t.Fatalf("extra %q: imported value %s, sealed %s", value, a, b)
		}
	})
}

func TestJSONLBlankLinesAndNoFinalNewline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	s := must(t)(session.FromUserMessage(ctx, g, "x"))
	out := export(t, g, s.ID())
	in := "\n" + strings.Replace(string(out), "\n", "\n\r\n", 1)
	in = strings.TrimSuffix(in, "\n")
	got, err := session.Import(ctx, session.NewMemoryGraph(), strings.NewReader(in))
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if got.Hash() != s.Hash() {
		t.Fatalf("hash %s, want %s", got.Hash(), s.Hash())
	}
}

func FuzzImport(f *testing.F) {
	g, head := richGraph(f)
	f.Add(export(f, g, head.ID()))
	small := session.NewMemoryGraph()
	s, err := session.FromUserMessage(context.Background(), small, "hi")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(export(f, small, s.ID()))
	f.Add([]byte(""))
	f.Add([]byte("{\"record\":\"rath.session\",\"schema_version\":1,\"head\":\"0190a000-0000-7000-8000-000000000000\"}\n"))
	f.Add([]byte("{\"record\":\"rath.session\",\"schema_version\":1e400}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx := context.Background()
		s, err := session.Import(ctx, session.NewMemoryGraph(), bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, session.ErrFormat) && !errors.Is(err, session.ErrInvalidChunk) &&
				!errors.Is(err, session.ErrInvalidVersion) && !errors.Is(err, session.ErrHashMismatch) &&
				!errors.Is(err, session.ErrNotFound) && !errors.Is(err, session.ErrCycle) &&
				!errors.Is(err, session.ErrConflict) && !errors.Is(err, session.ErrTooLarge) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		// Anything that imports re-exports, and re-imports to the same bytes.
		first := export(t, s.Graph(), s.ID())
		g2 := session.NewMemoryGraph()
		s2, err := session.Import(ctx, g2, bytes.NewReader(first))
		if err != nil {
			t.Fatalf("re-import of an export failed: %v\n%s", err, first)
		}
		if s2.Hash() != s.Hash() {
			t.Fatalf("re-imported head hash %s, want %s", s2.Hash(), s.Hash())
		}
		if second := export(t, g2, s2.ID()); !bytes.Equal(first, second) {
			t.Fatalf("export not stable:\n%s\n---\n%s", first, second)
		}
		cs, err := s.Chunks(ctx)
		if err != nil || len(cs) != s.Len() {
			t.Fatalf("transcript: %d chunks, err %v, want len %d", len(cs), err, s.Len())
		}
	})
}

func FuzzNewChunk(f *testing.F) {
	for _, c := range []session.Chunk{
		session.System("s"), session.User("héllo 🌏"), session.Assistant("", session.ToolCall{ID: "a", Function: session.FunctionCall{Name: "f", Arguments: "{}"}}),
		session.ToolResultChunk(session.ToolResult{ToolCallID: "a", Name: "f", Content: `{"ok":true}`}),
	} {
		f.Add(string(c.Kind()), []byte(c.Payload()))
	}
	f.Add("note", []byte(`{"b":[1,2.50,1e3],"a":{"z":null}}`))
	f.Add("assistant", []byte(`{"content":null,"tool_calls":null}`))
	f.Add("user", []byte(`{"content":"\ud83d"}`))
	f.Add("summary", []byte(`{"text":"x"} `))
	f.Fuzz(func(t *testing.T, kind string, payload []byte) {
		c, err := session.NewChunk(session.Kind(kind), payload)
		if err != nil {
			if !errors.Is(err, session.ErrInvalidChunk) && !errors.Is(err, session.ErrTooLarge) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		again, err := session.NewChunk(c.Kind(), c.Payload())
		if err != nil {
			t.Fatalf("canonical payload %s refused: %v", c.Payload(), err)
		}
		if !again.Equal(c) || again.Hash() != c.Hash() {
			t.Fatalf("canonical form not stable: %s vs %s", c.Payload(), again.Payload())
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back session.Chunk
		if err := json.Unmarshal(b, &back); err != nil || !back.Equal(c) {
			t.Fatalf("JSON round trip: %v, %s vs %s", err, back.Payload(), c.Payload())
		}
		_ = c.String()
		_ = c.Text()
	})
}

// tenK builds a session of 10,000 chunks, one append each, as a long agent
// run records them.
func tenK(b *testing.B) (*session.MemoryGraph, session.Session) {
	b.Helper()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	s, err := session.FromAgentPrompt(ctx, g, "You are a careful engineer.")
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i < 10000; i++ {
		var c session.Chunk
		if i%2 == 1 {
			c = session.User(fmt.Sprintf("message %d: please look at file_%d.go and tell me what it does", i, i))
		} else {
			c = session.Assistant(fmt.Sprintf("reply %d: it defines a handler that reads a request, validates it and writes a row", i))
		}
		if s, err = s.Append(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	if s.Len() != 10000 {
		b.Fatalf("len %d", s.Len())
	}
	return g, s
}

func BenchmarkExport10k(b *testing.B) {
	g, s := tenK(b)
	ctx := context.Background()
	var buf bytes.Buffer
	if err := session.Export(ctx, g, s.ID(), &buf); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		buf.Reset()
		if err := session.Export(ctx, g, s.ID(), &buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkImport10k(b *testing.B) {
	g, s := tenK(b)
	ctx := context.Background()
	var buf bytes.Buffer
	if err := session.Export(ctx, g, s.ID(), &buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := session.Import(ctx, session.NewMemoryGraph(), bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
