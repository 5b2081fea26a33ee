// Package gctune sets Go's garbage collector for Rath's processes (the
// coordinator, the worker and rathctl, whose dev and bench commands run
// the whole stack) where the operator has not.
//
// The contract, applied once at the start of a process by [Apply]:
//
//   - GOGC unset (or empty): the collector runs at [DefaultGOGC] (200)
//     instead of Go's 100. A step allocates much and keeps little (the
//     live heap is a few MiB in a loaded in-process stack), so with Go's
//     default the collector runs very often; at 200 it runs half as often.
//     In docs/BENCHMARKS.md ("Issue 25, fourteenth round") that halved the
//     collector's CPU per step (35–65 µs a step, 3–5% of the process). The
//     price is a heap that may reach about three times what is live between
//     collections, where Go's default lets it reach two.
//   - GOMEMLIMIT unset: when the process runs in a cgroup with a memory
//     limit (a container, a Kubernetes pod), the soft memory limit is set to
//     [LimitRatio] (90%) of it, so the collector works harder as the heap
//     nears the limit instead of letting the process be killed. Without a
//     cgroup limit nothing is set: Go's default, no soft limit.
//   - GOGC or GOMEMLIMIT set, even to Go's own defaults ("100", "off"):
//     that value stands; the runtime already read it.
//
// The effective values are on the coordinator's and the workers' /metrics
// as go_gc_gogc_percent and go_gc_gomemlimit_bytes.
package gctune

import (
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// DefaultGOGC is the collector's target percentage where GOGC is unset.
const DefaultGOGC = 200

// LimitRatio is the share of a cgroup memory limit the soft memory limit is
// set to where GOMEMLIMIT is unset.
const LimitRatio = 0.9

// Settings says what Apply left the collector with, and why.
type Settings struct {
	// GOGC is the collector's target percentage, as runtime/metrics'
	// /gc/gogc:percent reports it.
	GOGC int
	// GOGCFrom is "GOGC" (the operator's) or "default" (DefaultGOGC).
	GOGCFrom string
	// MemoryLimit is the soft memory limit in bytes (math.MaxInt64: none).
	MemoryLimit int64
	// MemoryLimitFrom is "GOMEMLIMIT" (the operator's), "cgroup"
	// (LimitRatio of the cgroup's limit) or "none".
	MemoryLimitFrom string
}

// CgroupLimit returns the memory limit of the cgroup the process runs in,
// or an error when it has none or none can be read.
type CgroupLimit func() (uint64, error)

// Apply sets the collector as the package documentation says. getenv
// reads the environment (os.Getenv); limit reads the cgroup's memory limit
// (nil: [FromCgroup]). An unreadable cgroup limit is no limit: it never
// stops a process from starting.
func Apply(getenv func(string) string, limit CgroupLimit) Settings {
	if limit == nil {
		limit = FromCgroup
	}
	s := Settings{GOGCFrom: "GOGC", MemoryLimitFrom: "GOMEMLIMIT"}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGOGC)
		s.GOGCFrom = "default"
	}
	s.GOGC = gcPercent()
	if getenv("GOMEMLIMIT") == "" {
		s.MemoryLimitFrom = "none"
		if n, err := limit(); err == nil && n > 0 {
			debug.SetMemoryLimit(ofLimit(n))
			s.MemoryLimitFrom = "cgroup"
		}
	}
	s.MemoryLimit = debug.SetMemoryLimit(-1)
	return s
}

// ofLimit is LimitRatio of a cgroup limit of n bytes, as a soft limit.
func ofLimit(n uint64) int64 {
	f := float64(n) * LimitRatio
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(f)
}

// gcPercent reads the collector's target percentage (runtime/metrics'
// /gc/gogc:percent) without changing it.
func gcPercent() int {
	m := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(m[0].Value.Uint64())
}

// FromCgroup is the memory limit of the process's cgroup (v1 or v2, read
// by github.com/KimMachineGun/automemlimit).
func FromCgroup() (uint64, error) {
	n, err := memlimit.FromCgroup()
	if err != nil {
		return 0, fmt.Errorf("cgroup memory limit: %w", err)
	}
	return n, nil
}
