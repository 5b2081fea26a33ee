package openrath_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
)

// addFixtureSeeds adds the fixture files matching glob, when the fixtures
// are present (the committed corpus under testdata/fuzz holds copies).
func addFixtureSeeds(f *testing.F, globs ...string) {
	dir, err := os.Getwd()
	if err != nil {
		return
	}
	for {
		cand := filepath.Join(dir, "shared", "fixtures", "openrath")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			for _, g := range globs {
				paths, _ := filepath.Glob(filepath.Join(cand, g))
				for _, p := range paths {
					if b, err := os.ReadFile(p); err == nil {
						f.Add(b)
					}
				}
			}
			return
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		return
	}
}

func samePersisted(t *testing.T, a, b *openrath.Persisted) {
	t.Helper()
	if !reflect.DeepEqual(a.Header, b.Header) || !reflect.DeepEqual(a.Trailer, b.Trailer) || len(a.Rows) != len(b.Rows) {
		t.Fatalf("persisted differs:\n%+v\n%+v", a, b)
	}
	for i := range a.Rows {
		if a.Rows[i].Index != b.Rows[i].Index || !a.Rows[i].Chunk.Equal(b.Rows[i].Chunk) {
			t.Fatalf("row %d differs: %s vs %s", i, a.Rows[i].Chunk.Payload(), b.Rows[i].Chunk.Payload())
		}
	}
}

func FuzzLoadPersisted(f *testing.F) {
	f.Add([]byte(hdrLine + chunk0 + chunk1 + trailerLine))
	f.Add([]byte(hdrLine + chunk0 + chunk1[:30]))
	f.Add([]byte(hdrLine + "{\"record_type\": \"chunk\", \"index\": 0, \"kind\": \"user\", \"payload\": {\"content\": \"\xe5"))
	addFixtureSeeds(f, "sessions*/*")
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := openrath.Read(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, openrath.ErrFormat) && !errors.Is(err, openrath.ErrSchema) &&
				!errors.Is(err, session.ErrInvalidChunk) && !errors.Is(err, session.ErrTooLarge) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		// What loads, writes back and reloads to the same transcript, and
		// the written form is stable.
		var first bytes.Buffer
		if _, err := p.WriteTo(&first); err != nil {
			t.Fatalf("write: %v", err)
		}
		p2, err := openrath.Read(bytes.NewReader(first.Bytes()))
		if err != nil {
			t.Fatalf("reload: %v\n%s", err, first.Bytes())
		}
		if p2.TornTail != 0 {
			t.Fatalf("written file has a torn tail")
		}
		samePersisted(t, p, p2)
		var second bytes.Buffer
		if _, err := p2.WriteTo(&second); err != nil || !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("second write differs (%v)", err)
		}
		// And it imports into the graph, and survives Rath JSONL.
		ctx := context.Background()
		s, err := openrath.ImportPersisted(ctx, session.NewMemoryGraph(), p)
		if err != nil {
			t.Fatalf("import of a loadable transcript: %v", err)
		}
		if s.Len() != len(p.Rows) {
			t.Fatalf("imported %d chunks, want %d", s.Len(), len(p.Rows))
		}
		var buf bytes.Buffer
		if err := session.Export(ctx, s.Graph(), s.ID(), &buf); err != nil {
			t.Fatalf("export: %v", err)
		}
		if s2, err := session.Import(ctx, session.NewMemoryGraph(), &buf); err != nil || s2.Hash() != s.Hash() {
			t.Fatalf("Rath JSONL round trip: %v", err)
		}
	})
}

func FuzzReadLineage(f *testing.F) {
	f.Add([]byte(`{"id": "00000000-0000-4000-8000-00000000000a", "parent_session_ids": ["00000000-0000-4000-8000-00000000000b"], "lineage_operator": "Session.fork", "lineage_kind": "op_fork", "lineage_extras": [["k", {"z": [1, 2.50, "\u2028"], "a": null}]], "chunk_count": 3, "cumulative_usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}` + "\n"))
	f.Add([]byte(`{"id": "00000000-0000-4000-8000-00000000000a", "parent_session_ids": ["00000000-0000-4000-8000-00000000000a"]}`))
	f.Add([]byte("\n\n{}\n"))
	addFixtureSeeds(f, "*.jsonl")
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, err := openrath.ReadLineage(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, openrath.ErrFormat) && !errors.Is(err, session.ErrTooLarge) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		var first bytes.Buffer
		if err := openrath.WriteLineage(&first, recs); err != nil {
			t.Fatalf("write: %v", err)
		}
		again, err := openrath.ReadLineage(bytes.NewReader(first.Bytes()))
		if err != nil {
			t.Fatalf("reread: %v\n%s", err, first.Bytes())
		}
		if len(again) != len(recs) || (len(recs) > 0 && !reflect.DeepEqual(again, recs)) {
			t.Fatalf("records differ after a write:\n%+v\n%+v", recs, again)
		}
		var second bytes.Buffer
		if err := openrath.WriteLineage(&second, again); err != nil || !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("second write differs (%v)", err)
		}
		ss, err := openrath.ImportLineage(context.Background(), session.NewMemoryGraph(), recs)
		if err != nil {
			if !errors.Is(err, openrath.ErrFormat) && !errors.Is(err, session.ErrCycle) {
				t.Fatalf("import error wraps no sentinel: %v", err)
			}
			return
		}
		// The graph keeps every record: written back from the graph, each
		// one decodes to the same JSON (object keys inside extras values
		// come back sorted, the only liberty the graph takes).
		for i, s := range ss {
			back, err := openrath.LineageRecordOf(s.Version())
			if err != nil {
				t.Fatalf("record %d from graph: %v", i, err)
			}
			var a, b bytes.Buffer
			if err := openrath.WriteLineage(&a, recs[i:i+1]); err != nil {
				t.Fatal(err)
			}
			if err := openrath.WriteLineage(&b, []openrath.LineageRecord{back}); err != nil {
				t.Fatal(err)
			}
			if !sameDecoded(a.Bytes(), b.Bytes()) {
				t.Fatalf("record %d lost in the graph:\n%s\n%s", i, a.Bytes(), b.Bytes())
			}
		}
	})
}

func sameDecoded(a, b []byte) bool {
	dec := func(x []byte) any {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return nil
		}
		return v
	}
	return reflect.DeepEqual(dec(a), dec(b))
}
