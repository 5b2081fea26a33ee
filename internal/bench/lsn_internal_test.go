package bench

import (
	"fmt"
	"testing"
)

func TestParseLSN(t *testing.T) {
	for in, want := range map[string]uint64{
		"0/0":               0,
		"0/615EC38":         0x615EC38,
		"16/B374D848":       0x16<<32 | 0xB374D848,
		"FFFFFFFF/FFFFFFFF": 1<<64 - 1,
	} {
		if got, ok := parseLSN(in); !ok || got != want {
			t.Errorf("parseLSN(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "0", "/1", "1/", "1/100000000", "x/1", "1/2/3", "-1/0"} {
		if got, ok := parseLSN(in); ok {
			t.Errorf("parseLSN(%q) = %d; want refused", in, got)
		}
	}
}

// FuzzParseLSN: any text is refused or read as the position it writes.
func FuzzParseLSN(f *testing.F) {
	for _, s := range []string{"0/0", "16/B374D848", "1/", "ffffffff/ffffffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := parseLSN(s)
		if !ok {
			return
		}
		if again, ok := parseLSN(fmt.Sprintf("%X/%X", v>>32, v&0xFFFFFFFF)); !ok || again != v {
			t.Fatalf("parseLSN(%q) = %d, which reads back as %d, %v", s, v, again, ok)
		}
	})
}
