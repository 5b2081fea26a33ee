package jsonl_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/rath-run/rath/internal/jsonl"
)

// FuzzReader checks the bounded line reader against a plain bytes.Split
// of the same input: the same lines, in order, with the same "ended in a
// newline" flag and line numbers; the first line over the limit is
// ErrLineTooLong at that line's number, whatever its length relative to the
// 64 KiB buffer (reps repeats data to make lines longer than it); nothing
// after io.EOF. With slow set the input arrives one byte per Read.
func FuzzReader(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), uint32(3), uint16(1), false)
	f.Add([]byte("a\nbb\n"), uint32(1), uint16(1), true)
	f.Add([]byte("{}\n"), uint32(2), uint16(1), false)
	f.Add([]byte(""), uint32(0), uint16(1), false)
	f.Add([]byte("\n\n"), uint32(0), uint16(3), true)
	f.Add(bytes.Repeat([]byte("x"), 1000), uint32(70000), uint16(70), false) // one 70000-byte line at the limit
	f.Add(bytes.Repeat([]byte("x"), 1000), uint32(69999), uint16(70), false) // one byte over
	f.Add(append(bytes.Repeat([]byte("y"), 1023), '\n'), uint32(65535), uint16(64), false)
	f.Fuzz(func(t *testing.T, data []byte, maxLen uint32, reps uint16, slow bool) {
		limit := int(maxLen % (1 << 18))
		// At most 256 KiB per input (lines past the 64 KiB buffer, yet each
		// run quick: a slow one can outlast a short -fuzztime).
		n := int(reps%200) + 1
		if len(data)*n > 256<<10 {
			n = max(1, (256<<10)/max(len(data), 1))
		}
		in := bytes.Repeat(data, n)
		var r io.Reader = bytes.NewReader(in)
		if slow {
			if len(in) > 4096 {
				return
			}
			r = iotest.OneByteReader(r)
		}
		want := bytes.Split(in, []byte("\n"))
		if len(in) == 0 || in[len(in)-1] == '\n' {
			want = want[:len(want)-1] // no line after the last newline
		}
		lr := jsonl.NewReader(r, limit)
		for i, w := range want {
			line, nl, err := lr.Next()
			if lr.Line() != i+1 {
				t.Fatalf("line %d: Line() = %d", i+1, lr.Line())
			}
			if len(w) > limit {
				if !errors.Is(err, jsonl.ErrLineTooLong) {
					t.Fatalf("line %d of %d bytes, limit %d: got %d bytes, %v; want ErrLineTooLong", i+1, len(w), limit, len(line), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if !bytes.Equal(line, w) {
				t.Fatalf("line %d: got %q, want %q", i+1, line, w)
			}
			if wantNL := i < len(want)-1 || in[len(in)-1] == '\n'; nl != wantNL {
				t.Fatalf("line %d: newline = %v, want %v", i+1, nl, wantNL)
			}
		}
		for range 2 {
			if line, _, err := lr.Next(); !errors.Is(err, io.EOF) || line != nil {
				t.Fatalf("after the last line: %q, %v; want io.EOF", line, err)
			}
		}
	})
}
