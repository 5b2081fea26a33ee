package openrath_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
)

func readJSON(t testing.TB, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// generic re-decodes v's JSON form as untyped JSON for comparison with the
// expected files.
func generic(t testing.TB, v any) any {
	t.Helper()
	var b []byte
	switch x := v.(type) {
	case []byte:
		b = x
	case json.RawMessage:
		b = x
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return out
}

func sameJSON(t testing.TB, what string, got, want any) {
	t.Helper()
	if g, w := generic(t, got), generic(t, want); !reflect.DeepEqual(g, w) {
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		t.Fatalf("%s:\n got %s\nwant %s", what, gb, wb)
	}
}

// firstLine returns the record on line i (from 0) of the file as written.
func record(t testing.TB, path string, i int) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	return json.RawMessage(lines[i])
}

func kinds(cs []session.Chunk) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, string(c.Kind()))
	}
	return out
}

type persistedCase struct {
	File   string `json:"file"`
	Loader struct {
		Closed          bool            `json:"closed"`
		ChunkCount      int             `json:"chunk_count"`
		ChunkKinds      []string        `json:"chunk_kinds"`
		CumulativeUsage json.RawMessage `json:"cumulative_usage"`
		Header          json.RawMessage `json:"header"`
		TrailerRaw      json.RawMessage `json:"trailer_raw"`
	} `json:"loader"`
	DecodedToolResultBodies map[string]json.RawMessage `json:"decoded_tool_result_bodies"`
	ToResumablePair         *struct {
		UserSessionChunkKinds  []string `json:"user_session_chunk_kinds"`
		AgentSessionChunkKinds []string `json:"agent_session_chunk_kinds"`
		AgentSessionSystemText *string  `json:"agent_session_system_text"`
	} `json:"to_resumable_pair"`
	DriverAppendedTail    *string `json:"driver_appended_tail"`
	DriverAppendedTailHex *string `json:"driver_appended_tail_hex"`
}

func TestPersistedFixtures(t *testing.T) {
	t.Parallel()
	dir := testenv.OpenRathFixtures(t)
	var exp struct {
		Cases            map[string]persistedCase `json:"cases"`
		CasesSeparateDir map[string]persistedCase `json:"cases_separate_dir"`
		List             []struct {
			ID              string `json:"id"`
			File            string `json:"file"`
			CreatedAt       string `json:"created_at"`
			LineageOperator string `json:"lineage_operator"`
			LineageKind     string `json:"lineage_kind"`
			ChunkCount      int    `json:"chunk_count"`
			Closed          bool   `json:"closed"`
		} `json:"list_persisted_sessions"`
	}
	readJSON(t, filepath.Join(dir, "persisted.expected.json"), &exp)
	if len(exp.Cases) != 5 {
		t.Fatalf("expected file has %d cases, want 5", len(exp.Cases))
	}
	for name, c := range exp.Cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, c.File)
			p, err := openrath.Load(path)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if p.Closed() != c.Loader.Closed {
				t.Errorf("closed = %v, want %v", p.Closed(), c.Loader.Closed)
			}
			if len(p.Rows) != c.Loader.ChunkCount {
				t.Errorf("%d rows, want %d", len(p.Rows), c.Loader.ChunkCount)
			}
			if got := kinds(p.Chunks()); !slices.Equal(got, c.Loader.ChunkKinds) {
				t.Errorf("kinds %q, want %q", got, c.Loader.ChunkKinds)
			}
			sameJSON(t, "usage", p.Usage(), c.Loader.CumulativeUsage)
			// The decoded header: what we read, written back and decoded,
			// is what OpenRath's loader decoded.
			var hdr bytes.Buffer
			if _, err := (&openrath.Persisted{Header: p.Header}).WriteTo(&hdr); err != nil {
				t.Fatal(err)
			}
			gotHeader := generic(t, hdr.Bytes()).(map[string]any)
			delete(gotHeader, "record_type")
			sameJSON(t, "header", gotHeader, c.Loader.Header)
			if p.Trailer == nil {
				sameJSON(t, "trailer", nil, c.Loader.TrailerRaw)
			} else {
				sameJSON(t, "trailer", record(t, path, len(p.Rows)+1), c.Loader.TrailerRaw)
				sameJSON(t, "trailer fields", map[string]any{
					"record_type": "trailer", "closed_at": p.Trailer.ClosedAt,
					"final_chunk_count": p.Trailer.FinalChunkCount, "cumulative_usage": p.Trailer.CumulativeUsage,
				}, c.Loader.TrailerRaw)
			}
			for _, r := range p.Rows {
				tr, ok := r.Chunk.ToolResult()
				if !ok || c.DecodedToolResultBodies == nil {
					continue
				}
				want, ok := c.DecodedToolResultBodies[tr.ToolCallID]
				if !ok {
					t.Fatalf("no expected body for %s", tr.ToolCallID)
				}
				sameJSON(t, "tool body "+tr.ToolCallID, json.RawMessage(tr.Content), want)
			}
			if rp := c.ToResumablePair; rp != nil {
				if got := kinds(p.Chunks()); !slices.Equal(got, rp.UserSessionChunkKinds) {
					t.Errorf("resumable user kinds %q, want %q", got, rp.UserSessionChunkKinds)
				}
				agent, ok := p.AgentPrompt()
				var agentKinds []string
				if ok {
					agentKinds = []string{string(agent.Kind())}
				}
				if !slices.Equal(agentKinds, rp.AgentSessionChunkKinds) && (len(agentKinds)+len(rp.AgentSessionChunkKinds) > 0) {
					t.Errorf("resumable agent kinds %q, want %q", agentKinds, rp.AgentSessionChunkKinds)
				}
				if rp.AgentSessionSystemText != nil && agent.Text() != *rp.AgentSessionSystemText {
					t.Errorf("agent prompt %q, want %q", agent.Text(), *rp.AgentSessionSystemText)
				}
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if c.DriverAppendedTail != nil {
				if p.TornTail != len(*c.DriverAppendedTail) || !bytes.HasSuffix(raw, []byte(*c.DriverAppendedTail)) {
					t.Errorf("torn tail %d bytes, want the driver's %d", p.TornTail, len(*c.DriverAppendedTail))
				}
			} else if p.TornTail != 0 {
				t.Errorf("torn tail %d on an intact file", p.TornTail)
			}
			// Writing what we read reproduces OpenRath's bytes (less the
			// torn tail we dropped).
			var out bytes.Buffer
			if _, err := p.WriteTo(&out); err != nil {
				t.Fatal(err)
			}
			if want := raw[:len(raw)-p.TornTail]; !bytes.Equal(out.Bytes(), want) {
				t.Errorf("rewrite differs:\n got %s\nwant %s", out.Bytes(), want)
			}
		})
	}

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		metas, skipped, err := openrath.List(filepath.Join(dir, "sessions"))
		if err != nil || len(skipped) != 0 {
			t.Fatalf("list: %v, skipped %v", err, skipped)
		}
		if len(metas) != len(exp.List) {
			t.Fatalf("%d sessions listed, want %d", len(metas), len(exp.List))
		}
		for i, m := range metas {
			w := exp.List[i]
			if m.ID != w.ID || m.Path != filepath.Join(dir, w.File) || m.CreatedAt != w.CreatedAt ||
				m.LineageOperator != w.LineageOperator || m.LineageKind != w.LineageKind ||
				m.ChunkCount != w.ChunkCount || m.Closed != w.Closed {
				t.Errorf("entry %d = %+v, want %+v", i, m, w)
			}
		}
	})

	t.Run("torn_mid_utf8", func(t *testing.T) {
		t.Parallel()
		c := exp.CasesSeparateDir["b4_partial_torn_mid_utf8"]
		tail, err := hex.DecodeString(*c.DriverAppendedTailHex)
		if err != nil {
			t.Fatal(err)
		}
		// OpenRath raises UnicodeDecodeError here; we drop the torn line, as
		// it does for an ASCII-clean tear, and the listing survives.
		ps, skipped, err := openrath.LoadDir(filepath.Join(dir, "sessions_torn_utf8"))
		if err != nil || len(skipped) != 0 || len(ps) != 1 {
			t.Fatalf("load dir: %d sessions, skipped %v, err %v", len(ps), skipped, err)
		}
		p := ps[0]
		if p.Header.ID != "19ad491c-fba5-4193-b800-18b77b4096c5" || p.Closed() || len(p.Rows) != 1 ||
			p.Rows[0].Chunk.Text() != "半途而废" || p.TornTail != len(tail) {
			t.Fatalf("got id %s closed %v rows %d torn %d, want 1 user row, open, torn %d", p.Header.ID, p.Closed(), len(p.Rows), p.TornTail, len(tail))
		}
	})
}

func TestPersistedLoopFixture(t *testing.T) {
	t.Parallel()
	dir := testenv.OpenRathFixtures(t)
	var exp struct {
		File  string `json:"file"`
		InMem struct {
			ID               string          `json:"id"`
			ParentSessionIDs []string        `json:"parent_session_ids"`
			LineageOperator  string          `json:"lineage_operator"`
			LineageKind      string          `json:"lineage_kind"`
			LineageExtras    json.RawMessage `json:"lineage_extras"`
			ChunkKinds       []string        `json:"chunk_kinds"`
			CumulativeUsage  json.RawMessage `json:"cumulative_usage"`
		} `json:"in_memory_out"`
		Loader struct {
			Closed     bool `json:"closed"`
			ChunkCount int  `json:"chunk_count"`
		} `json:"loader"`
		Resumable struct {
			Agent []string `json:"agent_session_chunk_kinds"`
		} `json:"to_resumable_pair"`
		Responses []struct {
			ToolCalls []struct {
				ID        string `json:"id"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"tool_calls"`
		} `json:"scripted_model_responses"`
	}
	readJSON(t, filepath.Join(dir, "persisted_loop.expected.json"), &exp)
	p, err := openrath.Load(filepath.Join(dir, exp.File))
	if err != nil {
		t.Fatal(err)
	}
	h := p.Header
	if h.ID != exp.InMem.ID || !slices.Equal(h.ParentSessionIDs, exp.InMem.ParentSessionIDs) ||
		h.LineageOperator != exp.InMem.LineageOperator || h.LineageKind != exp.InMem.LineageKind || len(h.LineageExtras) != 0 {
		t.Fatalf("header %+v, want %+v", h, exp.InMem)
	}
	if got := kinds(p.Chunks()); !slices.Equal(got, exp.InMem.ChunkKinds) || !p.Closed() || len(p.Rows) != exp.Loader.ChunkCount {
		t.Fatalf("kinds %q closed %v, want %q closed %v", got, p.Closed(), exp.InMem.ChunkKinds, exp.Loader.Closed)
	}
	sameJSON(t, "usage", p.Usage(), exp.InMem.CumulativeUsage)
	if _, ok := p.AgentPrompt(); ok || len(exp.Resumable.Agent) != 0 {
		t.Fatalf("loop transcripts carry no agent prompt")
	}
	// Tool results follow the assistant's tool calls, in order.
	calls := p.Rows[1].Chunk.ToolCalls()
	if len(calls) != len(exp.Responses[0].ToolCalls) {
		t.Fatalf("%d tool calls, want %d", len(calls), len(exp.Responses[0].ToolCalls))
	}
	for i, want := range exp.Responses[0].ToolCalls {
		tr, ok := p.Rows[2+i].Chunk.ToolResult()
		if calls[i].ID != want.ID || calls[i].Function.Name != want.Name || calls[i].Function.Arguments != want.Arguments ||
			!ok || tr.ToolCallID != want.ID || tr.Name != want.Name {
			t.Fatalf("call %d: %+v / result %+v, want %+v", i, calls[i], tr, want)
		}
	}

	g := session.NewMemoryGraph()
	s, err := openrath.ImportPersisted(context.Background(), g, p)
	if err != nil {
		t.Fatal(err)
	}
	v := s.Version()
	if v.Op != session.OpImport || v.ID.String() != h.ID || s.Len() != 7 || len(v.Parents) != 0 ||
		v.Usage != (session.Usage{PromptTokens: 720, CompletionTokens: 65, TotalTokens: 785}) ||
		v.Placement.Backend != "local" || v.Placement.Spec.WorkingDir != "/var/openrath-fixtures/ws-loop" {
		t.Fatalf("imported %+v", v)
	}
	if got := extra(t, v, openrath.ExtraOp); got != `"step"` {
		t.Fatalf("openrath.op = %s, want \"step\"", got)
	}
	if got := extra(t, v, openrath.ExtraParentSessionIDs); got != `["45b0cbec-0cc8-4fdd-9e19-88cebf327719","ebac6df4-b046-4c9e-9165-63e2b942ea35"]` {
		t.Fatalf("parents extra = %s", got)
	}
}

func extra(t testing.TB, v *session.Version, key string) string {
	t.Helper()
	for _, e := range v.Extras {
		if e.Key == key {
			return string(e.Value)
		}
	}
	t.Fatalf("version %s has no extra %s", v.ID, key)
	return ""
}

type lineageRow struct {
	Label            string          `json:"label"`
	ID               string          `json:"id"`
	ParentSessionIDs []string        `json:"parent_session_ids"`
	LineageOperator  string          `json:"lineage_operator"`
	LineageKind      string          `json:"lineage_kind"`
	LineageExtras    json.RawMessage `json:"lineage_extras"`
	ChunkCount       int             `json:"chunk_count"`
	ChunkKinds       []string        `json:"chunk_kinds"`
	CumulativeUsage  json.RawMessage `json:"cumulative_usage"`
}

func TestLineageRichFixture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := testenv.OpenRathFixtures(t)
	var exp struct {
		Sessions  []lineageRow `json:"sessions"`
		LabelByID map[string]string
		Rows      []struct {
			Kind    string          `json:"kind"`
			Payload json.RawMessage `json:"payload"`
		} `json:"fork1_four_kinds_rows"`
		Queries struct {
			EdgePairs   [][2]string         `json:"edge_pairs"`
			Ancestors   map[string][]string `json:"ancestors_bfs"`
			Descendants map[string][]string `json:"descendants_dfs_preorder"`
		} `json:"graph_queries"`
	}
	readJSON(t, filepath.Join(dir, "lineage_rich.expected.json"), &exp)
	raw, err := os.ReadFile(filepath.Join(dir, "lineage_rich.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := openrath.ReadLineage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(exp.Sessions) {
		t.Fatalf("%d records, want %d", len(recs), len(exp.Sessions))
	}
	label := map[string]string{}
	for i, r := range recs {
		w := exp.Sessions[i]
		label[r.ID] = w.Label
		if r.ID != w.ID || !slices.Equal(r.ParentSessionIDs, w.ParentSessionIDs) || r.LineageOperator != w.LineageOperator ||
			r.LineageKind != w.LineageKind || r.ChunkCount != w.ChunkCount {
			t.Fatalf("record %d = %+v, want %+v", i, r, w)
		}
		sameJSON(t, w.Label+" usage", r.CumulativeUsage, w.CumulativeUsage)
		pairs := make([][2]any, len(r.LineageExtras))
		for j, e := range r.LineageExtras {
			pairs[j] = [2]any{e.Key, generic(t, e.Value)}
		}
		sameJSON(t, w.Label+" extras", pairs, w.LineageExtras)
	}
	var out bytes.Buffer
	if err := openrath.WriteLineage(&out, recs); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Fatalf("WriteLineage differs from OpenRath's bytes:\n got %s\nwant %s", out.Bytes(), raw)
	}

	// fork1's rows (not in the JSONL) are valid Rath chunks of the recorded
	// kinds; supplied to the import, they become its transcript.
	rows := make([]session.Chunk, len(exp.Rows))
	for i, r := range exp.Rows {
		c, err := session.NewChunk(session.Kind(r.Kind), r.Payload)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		sameJSON(t, "row payload", c.Payload(), r.Payload)
		rows[i] = c
	}
	if got := kinds(rows); !slices.Equal(got, exp.Sessions[1].ChunkKinds) {
		t.Fatalf("fork1 row kinds %q, want %q", got, exp.Sessions[1].ChunkKinds)
	}
	if calls := rows[2].ToolCalls(); len(calls) != 1 || calls[0].Function.Arguments != `{"cmd": "wc -w README.md"}` {
		t.Fatalf("fork1 tool call %+v", calls)
	}
	withRows := slices.Clone(recs)
	withRows[1].Rows = rows

	g := session.NewMemoryGraph()
	ss, err := openrath.ImportLineage(ctx, g, withRows)
	if err != nil {
		t.Fatal(err)
	}
	wantOps := map[string]session.Op{
		"root": session.OpCreate, "fork1_four_kinds": session.OpFork, "fork2": session.OpFork, "fork3_of_fork1": session.OpFork,
		"detach_of_fork2": session.OpDetach, "merge_fork1_fork2": session.OpMerge, "extra_unstamped": session.OpCreate,
	}
	byID := map[string]*session.Version{}
	for i, s := range ss {
		v := s.Version()
		byID[v.ID.String()] = v
		l := exp.Sessions[i].Label
		if v.ID.String() != recs[i].ID || v.Op != wantOps[l] {
			t.Errorf("%s: id %s op %s, want %s %s", l, v.ID, v.Op, recs[i].ID, wantOps[l])
		}
		if got := extra(t, v, openrath.ExtraChunkCount); got != jsonInt(recs[i].ChunkCount) {
			t.Errorf("%s: chunk_count extra %s", l, got)
		}
	}
	fork1 := ss[1]
	equalKinds(t, fork1, exp.Sessions[1].ChunkKinds)
	if ss[0].Len() != 0 {
		t.Errorf("root has %d chunks, want none (lineage files carry no payloads)", ss[0].Len())
	}
	if u := ss[5].Usage(); u != (session.Usage{PromptTokens: 200, CompletionTokens: 50, TotalTokens: 250}) {
		t.Errorf("merge usage %+v", u)
	}

	// OpenRath's graph queries, over the graph's parent links.
	var edges [][2]string
	for _, r := range recs {
		for _, p := range byID[r.ID].Parents {
			edges = append(edges, [2]string{p.String(), r.ID})
		}
	}
	if !reflect.DeepEqual(edges, exp.Queries.EdgePairs) {
		t.Errorf("edge pairs %v, want %v", edges, exp.Queries.EdgePairs)
	}
	for _, r := range recs {
		l := label[r.ID]
		if got := ancestorsBFS(byID, r.ID); !slices.Equal(got, exp.Queries.Ancestors[l]) {
			t.Errorf("ancestors of %s: %v, want %v", l, got, exp.Queries.Ancestors[l])
		}
		got := descendants(byID, recs, r.ID)
		want := slices.Clone(exp.Queries.Descendants[l])
		slices.Sort(got)
		slices.Sort(want) // OpenRath's order is quirky (README note 7): compare as sets
		if !slices.Equal(got, want) {
			t.Errorf("descendants of %s: %v, want %v", l, got, want)
		}
	}

	// Nothing is lost: the records come back out of the graph byte for byte.
	back := make([]openrath.LineageRecord, len(ss))
	for i, s := range ss {
		if back[i], err = openrath.LineageRecordOf(s.Version()); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := openrath.WriteLineage(&out, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Fatalf("records from the graph differ:\n got %s\nwant %s", out.Bytes(), raw)
	}

	// Importing again is a no-op; the Rath JSONL export of the merge carries
	// its ancestry and re-imports.
	if _, err := openrath.ImportLineage(ctx, g, withRows); err != nil {
		t.Fatalf("re-import: %v", err)
	}
	var buf bytes.Buffer
	if err := session.Export(ctx, g, ss[5].ID(), &buf); err != nil {
		t.Fatal(err)
	}
	if _, err := session.Import(ctx, session.NewMemoryGraph(), &buf); err != nil {
		t.Fatal(err)
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func equalKinds(t *testing.T, s session.Session, want []string) {
	t.Helper()
	cs, err := s.Chunks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(cs); !slices.Equal(got, want) {
		t.Fatalf("kinds %q, want %q", got, want)
	}
}

func ancestorsBFS(byID map[string]*session.Version, id string) []string {
	out := []string{}
	seen := map[string]bool{id: true}
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, p := range byID[cur].Parents {
			if ps := p.String(); !seen[ps] {
				seen[ps] = true
				out = append(out, ps)
				queue = append(queue, ps)
			}
		}
	}
	return out
}

func descendants(byID map[string]*session.Version, recs []openrath.LineageRecord, id string) []string {
	out := []string{}
	seen := map[string]bool{id: true}
	stack := []string{id}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, r := range recs {
			for _, p := range byID[r.ID].Parents {
				if p.String() == cur && !seen[r.ID] {
					seen[r.ID] = true
					out = append(out, r.ID)
					stack = append(stack, r.ID)
				}
			}
		}
	}
	return out
}

func TestLineageDemoFixture(t *testing.T) {
	t.Parallel()
	dir := testenv.OpenRathFixtures(t)
	raw, err := os.ReadFile(filepath.Join(dir, "lineage_demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := openrath.ReadLineage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range recs {
		ops = append(ops, r.LineageOperator)
	}
	if !slices.Equal(ops, []string{"Session.fork", "Session.fork", "Session.detach", "Session.fork"}) {
		t.Fatalf("operators %q", ops)
	}
	var out bytes.Buffer
	if err := openrath.WriteLineage(&out, recs); err != nil || !bytes.Equal(out.Bytes(), raw) {
		t.Fatalf("rewrite differs (%v):\n%s", err, out.Bytes())
	}
	// The stdout's edges are the records' parent links.
	stdout, err := os.ReadFile(filepath.Join(dir, "02_session_lineage.stdout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var edges [][2]string
	for _, l := range strings.Split(string(stdout), "\n") {
		if a, b, ok := strings.Cut(strings.TrimSpace(l), " -> "); ok && !strings.HasSuffix(b, ":") {
			edges = append(edges, [2]string{a, b})
		}
	}
	var fileEdges [][2]string
	for _, r := range recs {
		for _, p := range r.ParentSessionIDs {
			fileEdges = append(fileEdges, [2]string{p, r.ID})
		}
	}
	if len(edges) != 3 || !reflect.DeepEqual(edges, fileEdges) {
		t.Fatalf("stdout edges %v, file edges %v", edges, fileEdges)
	}

	g := session.NewMemoryGraph()
	ss, err := openrath.ImportLineage(context.Background(), g, recs)
	if err != nil {
		t.Fatalf("dangling parents must be accepted: %v", err)
	}
	const root = "e350a714-23ba-4c43-acf1-d139f450e03b" // the unstamped root, absent from the file
	for i, want := range []struct {
		op       session.Op
		parents  int
		dangling string
	}{
		{session.OpImport, 0, `["` + root + `"]`},
		{session.OpImport, 0, `["` + root + `"]`},
		{session.OpDetach, 0, ""},
		{session.OpFork, 1, ""},
	} {
		v := ss[i].Version()
		if v.Op != want.op || len(v.Parents) != want.parents {
			t.Errorf("record %d: op %s with %d parents, want %s with %d", i, v.Op, len(v.Parents), want.op, want.parents)
		}
		if want.dangling != "" {
			if got := extra(t, v, openrath.ExtraDanglingParents); got != want.dangling {
				t.Errorf("record %d: dangling %s, want %s", i, got, want.dangling)
			}
			if got := extra(t, v, openrath.ExtraOperator); got != `"Session.fork"` {
				t.Errorf("record %d: operator extra %s", i, got)
			}
		}
	}
	if ss[3].Version().Parents[0] != ss[1].ID() {
		t.Fatalf("leaf's graph parent %s, want %s", ss[3].Version().Parents[0], ss[1].ID())
	}
}

// TestEveryFixtureImports imports every data file under the fixtures
// directory into a Session Graph, and checks the result survives a Rath
// JSONL round trip. Reference files (expected results, stdout, README) are
// named explicitly so a new data file cannot go unnoticed.
func TestEveryFixtureImports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := testenv.OpenRathFixtures(t)
	g := session.NewMemoryGraph()
	var heads []session.Session
	imported := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		name := d.Name()
		switch {
		case filepath.Dir(rel) != "." && (strings.HasSuffix(name, openrath.FinalSuffix) || strings.HasSuffix(name, openrath.PartialSuffix)):
			p, err := openrath.Load(path)
			if err != nil {
				t.Errorf("%s: %v", rel, err)
				return nil
			}
			for range 2 { // the second import is a no-op
				s, err := openrath.ImportPersisted(ctx, g, p)
				if err != nil {
					t.Errorf("%s: import: %v", rel, err)
					return nil
				}
				if s.Len() != len(p.Rows) {
					t.Errorf("%s: imported %d chunks, want %d", rel, s.Len(), len(p.Rows))
				}
				heads = append(heads, s)
			}
			imported++
		case filepath.Dir(rel) == "." && strings.HasSuffix(name, ".jsonl"):
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			recs, err := openrath.ReadLineage(f)
			if err != nil {
				t.Errorf("%s: %v", rel, err)
				return nil
			}
			ss, err := openrath.ImportLineage(ctx, g, recs)
			if err != nil {
				t.Errorf("%s: import: %v", rel, err)
				return nil
			}
			heads = append(heads, ss...)
			imported++
		case name == "README.md" || strings.HasSuffix(name, ".expected.json") || strings.HasSuffix(name, ".stdout.txt"):
		default:
			t.Errorf("unclassified fixture %s: teach this test to import it", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if imported != 9 {
		t.Errorf("imported %d data files, want 9 (2 lineage, 7 transcripts)", imported)
	}
	for _, s := range heads {
		var a, b bytes.Buffer
		if err := session.Export(ctx, g, s.ID(), &a); err != nil {
			t.Fatalf("export %s: %v", s.ID(), err)
		}
		g2 := session.NewMemoryGraph()
		s2, err := session.Import(ctx, g2, bytes.NewReader(a.Bytes()))
		if err != nil {
			t.Fatalf("re-import %s: %v", s.ID(), err)
		}
		if err := session.Export(ctx, g2, s2.ID(), &b); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("Rath JSONL round trip of %s differs (%v)", s.ID(), err)
		}
	}
}

// TestWriteSessionReproducesFixture: a transcript imported into the graph
// and written back out is byte-for-byte the file OpenRath wrote.
func TestWriteSessionReproducesFixture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := testenv.OpenRathFixtures(t)
	for _, name := range []string{
		"sessions/5dcca584-d85b-4378-8882-2b5fa107bcc4.jsonl",
		"sessions/e3575722-3e88-4369-8318-c705efc0b2ec.jsonl",
		"sessions/050c85e4-c8bb-45c5-b41b-b9dd622e067a.jsonl.__partial__",
		"sessions_loop/2d2df9cf-a8e8-42b5-a17b-50c9b1c46337.jsonl",
	} {
		path := filepath.Join(dir, name)
		p, err := openrath.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := openrath.ImportPersisted(ctx, session.NewMemoryGraph(), p)
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		written, err := openrath.WriteSession(ctx, out, s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(written)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile(path)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: written back differs:\n got %s\nwant %s", name, got, want)
		}
	}
}
