package gctune

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"
)

// restore puts the collector's settings back as the test found them: Apply
// changes process-wide state.
func restore(t *testing.T) {
	t.Helper()
	pct := debug.SetGCPercent(100)
	debug.SetGCPercent(pct)
	lim := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(lim)
	})
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func limitOf(n uint64, err error) CgroupLimit {
	return func() (uint64, error) { return n, err }
}

// TestDefaults: with neither GOGC nor GOMEMLIMIT set, the collector runs
// at DefaultGOGC, and the soft limit is 90% of the cgroup's limit.
func TestDefaults(t *testing.T) {
	restore(t)
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	s := Apply(env(nil), limitOf(1<<30, nil))
	if got := debug.SetGCPercent(100); got != DefaultGOGC || s.GOGC != DefaultGOGC || s.GOGCFrom != "default" {
		t.Errorf("GC percent %d, settings %+v; want %d from the default", got, s, DefaultGOGC)
	}
	want := ofLimit(1 << 30) // 90%: 966,367,641 bytes
	if want != 966367641 {
		t.Fatalf("ofLimit(1 GiB) = %d, want 966367641", want)
	}
	if got := debug.SetMemoryLimit(-1); got != want || s.MemoryLimit != want || s.MemoryLimitFrom != "cgroup" {
		t.Errorf("memory limit %d, settings %+v; want %d from the cgroup", got, s, want)
	}
}

// TestNoCgroupLimit: without a cgroup limit (or when it cannot be read)
// no soft limit is set.
func TestNoCgroupLimit(t *testing.T) {
	for name, lim := range map[string]CgroupLimit{
		"no limit":   limitOf(0, errors.New("no limit")),
		"unreadable": limitOf(0, errors.New("permission denied")),
		"zero":       limitOf(0, nil),
	} {
		t.Run(name, func(t *testing.T) {
			restore(t)
			debug.SetMemoryLimit(math.MaxInt64)
			s := Apply(env(nil), lim)
			if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 || s.MemoryLimitFrom != "none" {
				t.Errorf("memory limit %d, settings %+v; want none", got, s)
			}
		})
	}
}

// TestOperatorSettingsStand: GOGC and GOMEMLIMIT in the environment, even
// at Go's own defaults, are left as the runtime read them.
func TestOperatorSettingsStand(t *testing.T) {
	restore(t)
	debug.SetGCPercent(100)         // as the runtime read GOGC=100
	debug.SetMemoryLimit(512 << 20) // and GOMEMLIMIT=512MiB
	s := Apply(env(map[string]string{"GOGC": "100", "GOMEMLIMIT": "512MiB"}), limitOf(1<<30, nil))
	if got := debug.SetGCPercent(100); got != 100 || s.GOGCFrom != "GOGC" {
		t.Errorf("GC percent %d, settings %+v; want the operator's 100", got, s)
	}
	if got := debug.SetMemoryLimit(-1); got != 512<<20 || s.MemoryLimit != 512<<20 || s.MemoryLimitFrom != "GOMEMLIMIT" {
		t.Errorf("memory limit %d, settings %+v; want the operator's 512 MiB", got, s)
	}
}

// TestHugeCgroupLimit: a cgroup "limit" near the top of uint64 (cgroup v1
// reports no limit as such a number when the library does not recognize
// it) does not overflow into a negative soft limit.
func TestHugeCgroupLimit(t *testing.T) {
	restore(t)
	Apply(env(nil), limitOf(math.MaxUint64, nil))
	if got := debug.SetMemoryLimit(-1); got <= 0 {
		t.Fatalf("memory limit %d: overflowed", got)
	}
}
