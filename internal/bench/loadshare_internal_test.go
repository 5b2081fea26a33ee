package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// cpuProfile writes a CPU profile whose samples are (stack, nanoseconds),
// each stack its functions from the leaf.
func cpuProfile(t *testing.T, types []string, samples ...struct {
	stack []string
	ns    int64
}) []byte {
	t.Helper()
	p := &profile.Profile{PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 10_000_000}
	for _, ty := range types {
		p.SampleType = append(p.SampleType, &profile.ValueType{Type: ty, Unit: "nanoseconds"})
	}
	fns := map[string]*profile.Function{}
	for _, s := range samples {
		var locs []*profile.Location
		for _, name := range s.stack {
			fn, ok := fns[name]
			if !ok {
				fn = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
				fns[name] = fn
				p.Function = append(p.Function, fn)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		vals := make([]int64, len(types))
		for i := range vals {
			vals[i] = s.ns
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: vals})
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestLoadShare: the samples whose stack holds the bench's, its client's
// or the HTTP transport's functions are the load generator's; the
// stack's own (the coordinator's handler, a worker, a goroutine the bench
// started, which does not carry its starter's frames) are not.
func TestLoadShare(t *testing.T) {
	type sample = struct {
		stack []string
		ns    int64
	}
	prof := cpuProfile(t, []string{"samples", "cpu"},
		sample{[]string{"syscall.write", "github.com/rath-run/rath/pkg/client.(*Client).Do", "github.com/rath-run/rath/internal/bench.drive.func1"}, 30},
		sample{[]string{"bufio.(*Reader).Read", "net/http.(*persistConn).readLoop"}, 10},
		sample{[]string{"encoding/json.Unmarshal", "github.com/rath-run/rath/internal/coordinator.(*Coordinator).submit", "net/http.(*conn).serve"}, 45},
		sample{[]string{"github.com/rath-run/rath/internal/worker.(*Worker).handle"}, 15},
	)
	got, err := loadShare(prof)
	if err != nil || math.Abs(got-0.4) > 1e-9 {
		t.Fatalf("loadShare = %v, %v; want 0.4", got, err)
	}

	for name, c := range map[string]struct {
		prof []byte
		want string
	}{
		"not a profile":     {[]byte("not a profile"), "read the loaded phase's CPU profile"},
		"no cpu samples":    {cpuProfile(t, []string{"alloc_space"}, sample{[]string{"main.main"}, 1}), "no cpu samples"},
		"no samples at all": {cpuProfile(t, []string{"samples", "cpu"}), "empty"},
	} {
		if _, err := loadShare(c.prof); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}
