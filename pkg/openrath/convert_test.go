package openrath_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
)

const lineageLine = `{"id": "ca35f46c-12a1-4cf0-b410-d2376ab4728d", "parent_session_ids": [], "lineage_operator": "Session.create", "lineage_kind": "leaf_user", "lineage_extras": [["source", "Session.create"]], "chunk_count": 1, "cumulative_usage": null}` + "\n"

func TestDetect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     openrath.Format
		err      string
	}{
		{"rath", `{"record":"rath.session","schema_version":1,"head":"x"}` + "\n", openrath.FormatRath, ""},
		{"transcript", hdrLine + chunk0, openrath.FormatTranscript, ""},
		{"lineage", lineageLine, openrath.FormatLineage, ""},
		{"lineage without a newline", strings.TrimSuffix(lineageLine, "\n"), openrath.FormatLineage, ""},
		{"blank lines and a BOM", "\xef\xbb\xbf\n \r\n" + hdrLine, openrath.FormatTranscript, ""},
		{"empty", "", "", "the input is empty"},
		{"blank", "\n\n", "", "the input is empty"},
		{"not JSON", "# title\n", "", "line 1: not Rath session JSONL"},
		{"other keys", "\n{\"b\": 1, \"a\": 2}\n", "", "line 2: not Rath session JSONL, an OpenRath transcript or OpenRath lineage JSONL: the first record has keys [a b]"},
		{"too long", "{\"record\": \"" + strings.Repeat("x", 1<<20) + "\"}\n", "", "line 1: not Rath session JSONL, an OpenRath transcript or OpenRath lineage JSONL: the first record is longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, r, err := openrath.Detect(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, openrath.ErrUnknownFormat) {
					t.Fatalf("Detect = %q, %v; want an error with %q", f, err, tc.err)
				}
				return
			}
			if err != nil || f != tc.want {
				t.Fatalf("Detect = %q, %v; want %q", f, err, tc.want)
			}
			all, err := io.ReadAll(r)
			if err != nil || string(all) != tc.in {
				t.Fatalf("reader gives %q, %v; want the whole input", all, err)
			}
		})
	}
}

// TestConvertedImportsWithoutPlacement: a converted transcript has no
// placement (its sandbox stays in the extras), imports all at once as
// session JSONL, and PersistedOf writes the sandbox back.
func TestConvertedImportsWithoutPlacement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hdr := strings.Replace(hdrLine, `"sandbox_backend": null, "sandbox_spec": null, "sandbox_handle_id": null`,
		`"sandbox_backend": "local", "sandbox_spec": {"image": "python:3.12", "entrypoint": null, "env": {"LANG": "C.UTF-8"}, "timeout_seconds": 90.0, "working_dir": "/tmp/ws"}, "sandbox_handle_id": "h-1"`, 1)
	p, err := openrath.Read(strings.NewReader(hdr + chunk0 + chunk1 + trailerLine))
	if err != nil {
		t.Fatal(err)
	}
	c, err := openrath.ConvertTranscripts(ctx, []*openrath.Persisted{p})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Sessions[0]; v.Placement.Backend != "" || !v.Placement.Spec.IsZero() || v.Key != "" {
		t.Fatalf("converted version has placement %+v key %q", v.Placement, v.Key)
	}
	g := session.NewMemoryGraph()
	if err := importConverted(ctx, g, c); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(ctx, g, c.Sessions[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	back, err := openrath.PersistedOf(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	samePersisted(t, p, back)
	if b := back.Header.SandboxBackend; b == nil || *b != "local" || back.Header.SandboxHandleID == nil || *back.Header.SandboxHandleID != "h-1" {
		t.Fatalf("sandbox not written back: %+v", back.Header)
	}
}

func importConverted(ctx context.Context, g session.Graph, c *openrath.Converted) error {
	var buf bytes.Buffer
	if err := c.WriteJSONL(&buf); err != nil {
		return err
	}
	if _, err := session.Import(ctx, g, &buf); err != nil {
		return err
	}
	for _, v := range c.Sessions {
		got, err := g.Get(ctx, v.ID)
		if err != nil {
			return err
		}
		if got.Hash != v.Hash {
			return errors.New("imported hash differs")
		}
	}
	return nil
}

// FuzzDetectConvert: whatever the input, Detect either names a format
// (and gives the input back whole) or fails with ErrUnknownFormat; what the
// format's reader accepts converts, imports into a graph as session JSONL,
// and (for transcripts) exports back to the same version.
func FuzzDetectConvert(f *testing.F) {
	f.Add([]byte(hdrLine + chunk0 + chunk1 + trailerLine))
	f.Add([]byte(hdrLine + chunk0 + chunk1[:30]))
	f.Add([]byte(lineageLine))
	f.Add([]byte(`{"record":"rath.session","schema_version":1,"head":"x"}` + "\n"))
	f.Add([]byte("\n{\"a\": 1}\n"))
	addFixtureSeeds(f, "sessions*/*", "lineage_*.jsonl")
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx := context.Background()
		format, r, err := openrath.Detect(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, openrath.ErrUnknownFormat) {
				t.Fatalf("Detect error wraps no sentinel: %v", err)
			}
			return
		}
		all, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(all, in) {
			t.Fatalf("Detect's reader gives %q, %v; want the input", all, err)
		}
		var c *openrath.Converted
		switch format {
		case openrath.FormatTranscript:
			p, err := openrath.Read(bytes.NewReader(in))
			if err != nil {
				return
			}
			if c, err = openrath.ConvertTranscripts(ctx, []*openrath.Persisted{p}); err != nil {
				return // e.g. a created_at Rath cannot hash
			}
		case openrath.FormatLineage:
			recs, err := openrath.ReadLineage(bytes.NewReader(in))
			if err != nil {
				return
			}
			if c, err = openrath.ConvertLineage(ctx, recs); err != nil {
				return // a cycle, a repeated id
			}
		default:
			return
		}
		g := session.NewMemoryGraph()
		if err := importConverted(ctx, g, c); err != nil {
			t.Fatalf("a converted input does not import: %v", err)
		}
		if format != openrath.FormatTranscript {
			return
		}
		s, err := session.Open(ctx, g, c.Sessions[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		p, err := openrath.PersistedOf(ctx, s)
		if err != nil {
			t.Fatalf("PersistedOf: %v", err)
		}
		var out bytes.Buffer
		if _, err := p.WriteTo(&out); err != nil {
			t.Fatalf("write: %v", err)
		}
		p2, err := openrath.Read(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("reload the export: %v\n%s", err, out.Bytes())
		}
		c2, err := openrath.ConvertTranscripts(ctx, []*openrath.Persisted{p2})
		if err != nil {
			t.Fatalf("convert the export: %v", err)
		}
		if c2.Sessions[0].Hash != c.Sessions[0].Hash {
			t.Fatalf("export → import changed the version:\n%s", out.Bytes())
		}
	})
}

// BenchmarkImportDir measures what rathctl session import does with a
// sessions directory before it sends anything: load every transcript,
// convert, write one session JSONL body.
func BenchmarkImportDir(b *testing.B) {
	dir := b.TempDir()
	const n = 200
	for i := range n {
		id := fmt.Sprintf("3d6c15ef-af16-4699-b2d2-%012d", i)
		body := strings.ReplaceAll(hdrLine+chunk0+chunk1+trailerLine, "3d6c15ef-af16-4699-b2d2-3c17e2519c90", id)
		if err := os.WriteFile(filepath.Join(dir, id+openrath.FinalSuffix), []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		ps, _, err := openrath.LoadDir(dir)
		if err != nil || len(ps) != n {
			b.Fatal(len(ps), err)
		}
		c, err := openrath.ConvertTranscripts(ctx, ps)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.WriteJSONL(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/transcript")
}
