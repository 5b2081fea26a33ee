package cpustat

import (
	"runtime/metrics"
	"time"
)

// Collector is what Go's garbage collector has cost this process so far,
// from runtime/metrics: the runtime's estimate of the CPU time its
// collector used (/cpu/classes/gc/total:cpu-seconds: marking, assists and
// pauses), the collections it completed (/gc/cycles/total:gc-cycles), and
// the target percentage it runs at (/gc/gogc:percent, GOGC).
type Collector struct {
	CPU     time.Duration
	Cycles  uint64
	Percent uint64
}

// Collected reads the collector's cost so far; false if the runtime does
// not report it.
func Collected() (Collector, bool) {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindUint64 || s[2].Value.Kind() != metrics.KindUint64 {
		return Collector{}, false
	}
	return Collector{
		CPU:     time.Duration(s[0].Value.Float64() * float64(time.Second)),
		Cycles:  s[1].Value.Uint64(),
		Percent: s[2].Value.Uint64(),
	}, true
}
