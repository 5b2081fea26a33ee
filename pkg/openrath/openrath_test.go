package openrath_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
)

const (
	hdrLine     = `{"record_type": "header", "schema_version": 1, "id": "3d6c15ef-af16-4699-b2d2-3c17e2519c90", "created_at": "2026-11-22T13:21:55.599620+00:00", "parent_session_ids": [], "lineage_operator": "Session.create", "lineage_kind": "leaf_user", "lineage_extras": [["source", "Session.create"]], "sandbox_backend": null, "sandbox_spec": null, "sandbox_handle_id": null}` + "\n"
	chunk0      = `{"record_type": "chunk", "index": 0, "kind": "user", "payload": {"content": "hi"}}` + "\n"
	chunk1      = `{"record_type": "chunk", "index": 1, "kind": "assistant", "payload": {"content": "yo", "tool_calls": null}}` + "\n"
	trailerLine = `{"record_type": "trailer", "closed_at": "2026-11-22T13:21:56+00:00", "final_chunk_count": 2, "cumulative_usage": null}` + "\n"
)

func TestReadRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     error
		msg      string
	}{
		{"empty", "", openrath.ErrFormat, "no header"},
		{"bad json", hdrLine + "{nope\n", openrath.ErrFormat, "line 2: "},
		{"chunk before header", chunk0 + hdrLine, openrath.ErrFormat, "line 1: " + openrath.ErrFormat.Error() + ": chunk before the header"},
		{"duplicate header", hdrLine + chunk0 + hdrLine, openrath.ErrFormat, "line 3: " + openrath.ErrFormat.Error() + ": duplicate header"},
		{"unknown record", hdrLine + `{"record_type": "comment"}` + "\n", openrath.ErrFormat, `line 2: ` + openrath.ErrFormat.Error() + `: unknown record_type "comment"`},
		{"no record type", hdrLine + `{"index": 0}` + "\n", openrath.ErrFormat, "line 2: "},
		{"newer schema", strings.Replace(hdrLine, `"schema_version": 1`, `"schema_version": 2`, 1), openrath.ErrSchema, "line 1: " + openrath.ErrSchema.Error() + ": schema_version 2 is newer than 1"},
		{"record after trailer", hdrLine + chunk0 + chunk1 + trailerLine + chunk0, openrath.ErrFormat, "line 5: "},
		{"index gap", hdrLine + chunk1, openrath.ErrFormat, "line 2: " + openrath.ErrFormat.Error() + ": chunk index 1, want 0"},
		{"unknown kind", hdrLine + strings.Replace(chunk0, `"user"`, `"note"`, 1), session.ErrInvalidChunk, "line 2: "},
		{"bad payload", hdrLine + strings.Replace(chunk0, `{"content": "hi"}`, `{"text": "hi"}`, 1), session.ErrInvalidChunk, "line 2: chunk 0: "},
		{"invalid utf8", hdrLine + strings.Replace(chunk0, "hi", "h\xffi", 1), openrath.ErrFormat, "line 2: " + openrath.ErrFormat.Error() + ": invalid UTF-8"},
		{"count mismatch", hdrLine + chunk0 + trailerLine, openrath.ErrFormat, "line 3: " + openrath.ErrFormat.Error() + ": trailer final_chunk_count 2, but 1 chunks were read"},
		{"bad id", strings.Replace(hdrLine, `"3d6c15ef-af16-4699-b2d2-3c17e2519c90"`, `"nope"`, 1), openrath.ErrFormat, `line 1: ` + openrath.ErrFormat.Error() + `: id "nope" is not a canonical UUID`},
		{"bad time", strings.Replace(hdrLine, `2026-11-22T13:21:55.599620+00:00`, `yesterday`, 1), openrath.ErrFormat, "line 1: "},
		{"no header only torn", `{"record_type": "header"`, openrath.ErrFormat, "no header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := openrath.Read(strings.NewReader(tc.in))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
	t.Run("huge line", func(t *testing.T) {
		t.Parallel()
		_, err := openrath.Read(io.MultiReader(strings.NewReader(hdrLine), infinite('x')))
		if !errors.Is(err, session.ErrTooLarge) || !strings.Contains(err.Error(), "line 2: ") {
			t.Fatalf("error %v, want ErrTooLarge on line 2", err)
		}
	})
	t.Run("load names the path", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "x.jsonl")
		if err := os.WriteFile(path, []byte(hdrLine+"{nope\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openrath.Load(path); err == nil || !strings.Contains(err.Error(), path+": line 2: ") {
			t.Fatalf("error %v, want one naming %s and line 2", err, path)
		}
	})
}

type infinite byte

func (b infinite) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestReadPartialAndTorn(t *testing.T) {
	t.Parallel()
	p, err := openrath.Read(strings.NewReader(hdrLine + "\n" + chunk0 + chunk1[:20]))
	if err != nil {
		t.Fatal(err)
	}
	if p.Closed() || len(p.Rows) != 1 || p.TornTail != 20 || p.Usage() != nil {
		t.Fatalf("closed %v rows %d torn %d", p.Closed(), len(p.Rows), p.TornTail)
	}
	// A complete record without its newline is still a torn write.
	p, err = openrath.Read(strings.NewReader(hdrLine + chunk0 + chunk1 + strings.TrimSuffix(trailerLine, "\n")))
	if err != nil || p.Closed() || len(p.Rows) != 2 {
		t.Fatalf("err %v closed %v rows %d", err, p != nil && p.Closed(), len(p.Rows))
	}
}

func TestWriterProtocol(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "sessions")
	backend, wd := "local", "/ws"
	h := openrath.Header{
		ID: "7d3f2a10-1111-4222-8333-444455556666", ParentSessionIDs: []string{"3d6c15ef-af16-4699-b2d2-3c17e2519c90"},
		LineageOperator: "Session.fork", LineageKind: "op_fork",
		LineageExtras:  []openrath.Extra{{Key: "note", Value: json.RawMessage(`{"z": 1, "a": "ü\n"}`)}},
		SandboxBackend: &backend, SandboxSpec: &openrath.SandboxSpec{WorkingDir: &wd, Env: map[string]string{"B": "2", "A": "1"}},
	}
	w, err := openrath.Create(dir, h)
	if err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(dir, h.ID+openrath.PartialSuffix)
	if w.Path() != partial {
		t.Fatalf("path %s, want %s", w.Path(), partial)
	}
	st, err := os.Stat(partial)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("partial file: %v mode %v, want 0600", err, st.Mode())
	}
	// The header is on disk before any chunk: a reader sees an open session.
	if p, err := openrath.Load(partial); err != nil || p.Closed() || len(p.Rows) != 0 || p.Header.LineageOperator != "Session.fork" {
		t.Fatalf("partial after Create: %+v, %v", p, err)
	}
	if _, err := openrath.Create(dir, h); !errors.Is(err, openrath.ErrLocked) {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	note, _ := session.Evidence(session.KindNote, map[string]any{"x": 1})
	if err := w.WriteChunk(note); !errors.Is(err, session.ErrInvalidChunk) {
		t.Fatalf("evidence chunk: %v, want ErrInvalidChunk", err)
	}
	chunks := []session.Chunk{
		session.System("sys"), session.User("héllo \"q\" \u2028 \x01"),
		session.Assistant("", session.ToolCall{ID: "c", Function: session.FunctionCall{Name: "f", Arguments: `{"a": 1}`}}),
		session.ToolResultChunk(session.ToolResult{ToolCallID: "c", Name: "f", Content: `{"ok": true}`}),
	}
	for _, c := range chunks {
		if err := w.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := openrath.Load(partial); err != nil || len(p.Rows) != len(chunks) {
		t.Fatalf("each chunk is on disk as written: %v", err)
	}
	usage := &openrath.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}
	closedAt := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	if err := w.CloseAt(closedAt, usage); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(nil); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := w.WriteChunk(chunks[0]); !errors.Is(err, openrath.ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}
	final := filepath.Join(dir, h.ID+openrath.FinalSuffix)
	if _, err := os.Stat(partial); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial still exists after close: %v", err)
	}
	if w.Path() != final {
		t.Fatalf("path after close %s", w.Path())
	}
	p, err := openrath.Load(final)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Closed() || p.Trailer.ClosedAt != "2026-01-02T03:04:05.000006+00:00" || !reflect.DeepEqual(p.Usage(), usage) {
		t.Fatalf("trailer %+v", p.Trailer)
	}
	for i, c := range chunks {
		if !p.Rows[i].Chunk.Equal(c) {
			t.Fatalf("row %d: %s, want %s", i, p.Rows[i].Chunk.Payload(), c.Payload())
		}
	}
	if got := string(p.Header.LineageExtras[0].Value); got != `{"z": 1, "a": "ü\n"}` {
		t.Fatalf("extra value %s: key order and raw text must be kept", got)
	}
	raw, _ := os.ReadFile(final)
	if !bytes.Contains(raw, []byte(`"env": {"A": "1", "B": "2"}, "timeout_seconds": null`)) ||
		!bytes.Contains(raw, []byte(`"content": "héllo \"q\" `+"\u2028"+` \u0001"`)) {
		t.Fatalf("not written in Python's json.dumps style:\n%s", raw)
	}
	// The lock was released: a new writer for the id can start.
	w2, err := openrath.Create(dir, h)
	if err != nil {
		t.Fatalf("create after close: %v", err)
	}
	if err := w2.Abandon(); err != nil {
		t.Fatal(err)
	}
	if p, err := openrath.Load(partial); err != nil || p.Closed() {
		t.Fatalf("abandoned partial: %v", err)
	}
	// Both files now exist; the listing prefers the final one.
	metas, skipped, err := openrath.List(dir)
	if err != nil || len(skipped) != 0 || len(metas) != 1 || metas[0].Path != final || !metas[0].Closed {
		t.Fatalf("list: %+v %v %v", metas, skipped, err)
	}
}

func TestListSkipsUnreadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := strings.Replace(hdrLine, "3d6c15ef-af16-4699-b2d2-3c17e2519c90", "00000000-0000-4000-8000-000000000001", 1)
	older := strings.Replace(strings.Replace(hdrLine, "3d6c15ef-af16-4699-b2d2-3c17e2519c90", "00000000-0000-4000-8000-000000000002", 1), "2026-11-22", "2025-01-01", 1)
	for name, body := range map[string]string{
		"00000000-0000-4000-8000-000000000001.jsonl":             good + chunk0,
		"00000000-0000-4000-8000-000000000002.jsonl.__partial__": older,
		"00000000-0000-4000-8000-000000000003.jsonl":             "garbage\n",
		"notes.txt": "ignored",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	metas, skipped, err := openrath.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 2 || metas[0].ID != "00000000-0000-4000-8000-000000000002" || metas[1].ChunkCount != 1 {
		t.Fatalf("metas %+v", metas)
	}
	if len(skipped) != 1 || !strings.HasSuffix(skipped[0].Path, "000000000003.jsonl") || !errors.Is(skipped[0].Err, openrath.ErrFormat) {
		t.Fatalf("skipped %+v", skipped)
	}
	if _, _, err := openrath.List(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("listing a missing directory succeeded")
	}
}

func TestImportPersistedConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	p, err := openrath.Read(strings.NewReader(hdrLine + chunk0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openrath.ImportPersisted(ctx, g, p); err != nil {
		t.Fatal(err)
	}
	grown, err := openrath.Read(strings.NewReader(hdrLine + chunk0 + chunk1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openrath.ImportPersisted(ctx, g, grown); !errors.Is(err, session.ErrConflict) {
		t.Fatalf("import of a grown transcript under the same id: %v, want ErrConflict", err)
	}
}

func TestImportLineageErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
	_, err := openrath.ImportLineage(ctx, session.NewMemoryGraph(), []openrath.LineageRecord{
		{ID: a, ParentSessionIDs: []string{b}, LineageOperator: "Session.fork"},
		{ID: b, ParentSessionIDs: []string{a}, LineageOperator: "Session.fork"},
	})
	if !errors.Is(err, session.ErrCycle) {
		t.Fatalf("cycle: %v", err)
	}
	_, err = openrath.ImportLineage(ctx, session.NewMemoryGraph(), []openrath.LineageRecord{{ID: a}, {ID: a}})
	if !errors.Is(err, openrath.ErrFormat) || !strings.Contains(err.Error(), "record 1") {
		t.Fatalf("duplicate: %v", err)
	}
	_, err = openrath.ImportLineage(ctx, session.NewMemoryGraph(), []openrath.LineageRecord{{ID: a, ChunkCount: 2, Rows: []session.Chunk{session.User("x")}}})
	if !errors.Is(err, openrath.ErrFormat) {
		t.Fatalf("rows/count mismatch: %v", err)
	}
	// Children before parents in the file are fine.
	ss, err := openrath.ImportLineage(ctx, session.NewMemoryGraph(), []openrath.LineageRecord{
		{ID: b, ParentSessionIDs: []string{a}, LineageOperator: "Session.fork"},
		{ID: a, LineageOperator: "Session.create"},
	})
	if err != nil || ss[0].Op() != session.OpFork || ss[0].Version().Parents[0] != ss[1].ID() {
		t.Fatalf("out-of-order records: %v", err)
	}
}

func TestWriteNativeSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	s, err := session.FromAgentPrompt(ctx, g, "sys")
	if err != nil {
		t.Fatal(err)
	}
	note, _ := session.Evidence(session.KindNote, map[string]any{"why": "audit"})
	if s, err = s.To(ctx, session.Placement{Backend: "docker", Spec: session.Spec{Image: "alpine", TimeoutSeconds: 30}}); err != nil {
		t.Fatal(err)
	}
	if s, err = s.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.User("q"), note, session.Assistant("a")},
		Usage: session.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}}); err != nil {
		t.Fatal(err)
	}
	path, err := openrath.WriteSession(ctx, t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := openrath.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(p.Chunks()); strings.Join(got, ",") != "system,user,assistant" {
		t.Fatalf("kinds %v: evidence is left out, the rest kept in order", got)
	}
	h := p.Header
	if h.ID != s.ID().String() || h.LineageOperator != "run_session_loop" || h.LineageKind != "op_session_loop" ||
		len(h.ParentSessionIDs) != 1 || *h.SandboxBackend != "docker" || *h.SandboxSpec.Image != "alpine" ||
		*h.SandboxSpec.TimeoutSeconds != 30 || p.Usage().TotalTokens != 2 || !p.Closed() {
		t.Fatalf("header %+v usage %+v", h, p.Usage())
	}
}

func TestMapOperator(t *testing.T) {
	t.Parallel()
	for op, want := range map[string]session.Op{
		"Session.fork": session.OpFork, "Session.detach": session.OpDetach, "Session.merge": session.OpMerge,
		"run_session_loop": session.OpStep, "run_session_compress": session.OpCompress,
		"Session.create": session.OpCreate, "implicit": session.OpCreate,
	} {
		if got, ok := openrath.MapOperator(op); !ok || got != want {
			t.Errorf("MapOperator(%q) = %q, %v; want %q", op, got, ok, want)
		}
	}
	if _, ok := openrath.MapOperator("select_session"); ok {
		t.Error("unknown operator mapped")
	}
}
