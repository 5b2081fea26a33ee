package capbuf

import (
	"strings"
	"testing"
)

func TestBuffer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		max    int
		writes []string
		want   string
		trunc  bool
	}{
		{5, []string{"12", "345"}, "12345", false},
		{5, []string{"12", "3456"}, "12345", true},
		{5, []string{"123456", "7"}, "12345", true},
		{0, []string{"x"}, "", true},
		{0, nil, "", false},
	} {
		b := New(c.max)
		for _, w := range c.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Write(%q) = %d, %v; a capped buffer always takes everything", w, n, err)
			}
		}
		got, trunc := b.Bytes()
		if string(got) != c.want || trunc != c.trunc || got == nil {
			t.Errorf("max %d writes %q: %q truncated %v; want %q %v", c.max, strings.Join(c.writes, "|"), got, trunc, c.want, c.trunc)
		}
	}
}
