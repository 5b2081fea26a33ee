package cpustat

import (
	"runtime"
	"testing"
)

// TestCollected: forced collections are counted, and their CPU is.
func TestCollected(t *testing.T) {
	c0, ok := Collected()
	if !ok {
		t.Fatal("runtime/metrics reports no collector figures")
	}
	for range 3 {
		runtime.GC()
	}
	c1, ok := Collected()
	if !ok {
		t.Fatal("runtime/metrics reports no collector figures")
	}
	if c1.Cycles < c0.Cycles+3 {
		t.Errorf("cycles %d → %d after 3 forced collections", c0.Cycles, c1.Cycles)
	}
	if c1.CPU <= c0.CPU {
		t.Errorf("collector CPU %s → %s after 3 forced collections", c0.CPU, c1.CPU)
	}
}
