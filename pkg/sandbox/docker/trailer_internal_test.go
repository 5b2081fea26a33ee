package docker

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// writeChunks writes data to w in pieces of the given sizes (cycled).
func writeChunks(w interface{ Write([]byte) (int, error) }, data []byte, sizes []byte) {
	for i := 0; len(data) > 0; i++ {
		n := 1
		if len(sizes) > 0 {
			n = int(sizes[i%len(sizes)])%7 + 1
		}
		n = min(n, len(data))
		_, _ = w.Write(data[:n])
		data = data[n:]
	}
}

func TestTrailerWriter(t *testing.T) {
	t.Parallel()
	const nonce = "rath-exit-0123456789abcdef"
	for _, c := range []struct {
		in, out string
		code    int
		found   bool
	}{
		{"err\n" + nonce + ":3\n", "err\n", 3, true},
		{"no newline" + nonce + ":0\n", "no newline", 0, true},
		{nonce + ":137\nstraggler\n", "straggler\n", 137, true},
		{"plain stderr\n", "plain stderr\n", 0, false},
		{nonce + ":x\n", nonce + ":x\n", 0, false},
		{nonce + ":12345678\n", nonce + ":12345678\n", 0, false},
		{"half " + nonce[:10], "half " + nonce[:10], 0, false},
	} {
		for _, sizes := range [][]byte{nil, {3}, {0, 5, 1}, {100}} {
			var buf bytes.Buffer
			w := &trailerWriter{next: &buf, marker: []byte(nonce + ":")}
			writeChunks(w, []byte(c.in), sizes)
			w.flush()
			if buf.String() != c.out || w.found != c.found || w.code != c.code {
				t.Errorf("%q in chunks %v: out %q found %v code %d; want %q %v %d", c.in, sizes, buf.String(), w.found, w.code, c.out, c.found, c.code)
			}
		}
	}
}

func TestPidWriter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := &pidWriter{next: &buf, got: make(chan struct{})}
	writeChunks(w, []byte("4242\nerror output\n"), []byte{2})
	<-w.got
	if w.pid() != 4242 || buf.String() != "error output\n" {
		t.Fatalf("pid %d rest %q", w.pid(), buf.String())
	}
	buf.Reset()
	w = &pidWriter{next: &buf, got: make(chan struct{})}
	long := strings.Repeat("x", 40)
	_, _ = w.Write([]byte(long))
	<-w.got
	if w.pid() != 0 || buf.String() != long {
		t.Fatalf("not a pid line: pid %d rest %q", w.pid(), buf.String())
	}
}

// FuzzTrailerWriter: the trailer is taken out of any stream wherever it
// falls and in whatever pieces the stream arrives; everything else passes
// through unchanged.
func FuzzTrailerWriter(f *testing.F) {
	f.Add([]byte("err\n"), []byte("after"), uint8(3), []byte{1, 2, 3})
	f.Add([]byte(""), []byte(""), uint8(0), []byte{})
	f.Add([]byte("rath-exit-"), []byte("rath-exit-00:"), uint8(255), []byte{6})
	f.Fuzz(func(t *testing.T, before, after []byte, code uint8, sizes []byte) {
		const nonce = "rath-exit-feedfacecafebeef"
		if bytes.Contains(before, []byte(nonce)) || bytes.Contains(after, []byte(nonce)) {
			return
		}
		in := fmt.Appendf(append([]byte{}, before...), "%s:%d\n", nonce, code)
		in = append(in, after...)
		var buf bytes.Buffer
		w := &trailerWriter{next: &buf, marker: []byte(nonce + ":")}
		writeChunks(w, in, sizes)
		w.flush()
		want := append(append([]byte{}, before...), after...)
		if !w.found || w.code != int(code) || !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("found %v code %d (want %d) out %q want %q", w.found, w.code, code, buf.Bytes(), want)
		}
	})
}
