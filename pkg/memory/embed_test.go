package memory_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/rath-run/rath/pkg/memory"
)

// FuzzDecodeVector: a stored vector never panics the decoder; what decodes
// has dim finite components and encodes back to the same bytes.
func FuzzDecodeVector(f *testing.F) {
	f.Add(memory.EncodeVector([]float32{1, -0.5, 3e-8}), 3)
	f.Add([]byte{0, 0, 0x80, 0x7f}, 1) // +Inf
	f.Add([]byte{1, 2, 3}, 1)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, b []byte, dim int) {
		v, err := memory.DecodeVector(b, dim)
		if err != nil {
			if !memory.IsKind(err, memory.KindInternal) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		if len(v) != dim || !bytes.Equal(memory.EncodeVector(v), b) {
			t.Fatalf("round trip: dim %d, %d components, %x", dim, len(v), b)
		}
	})
}

func TestCosine(t *testing.T) {
	for _, tc := range []struct {
		a, b []float32
		want float64
	}{
		{[]float32{1, 0}, []float32{2, 0}, 1},
		{[]float32{1, 0}, []float32{0, 3}, 0},
		{[]float32{1, 1}, []float32{-1, -1}, -1},
		{[]float32{0, 0}, []float32{1, 1}, 0},
	} {
		if got := memory.Cosine(tc.a, tc.b); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Cosine(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
