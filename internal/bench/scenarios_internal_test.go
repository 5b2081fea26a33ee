package bench

import (
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/agent"
)

// The bench agent's replies carry the model latency and its jitter, and
// the spec is one a coordinator accepts.
func TestSpecCarriesModelJitter(t *testing.T) {
	for _, tc := range []struct {
		latency, jitter time.Duration
		rounds          int
	}{{500 * time.Millisecond, 100 * time.Millisecond, 0}, {200 * time.Millisecond, 0, 2}, {0, 0, 0}} {
		b := &runner{cfg: Config{ModelLatency: tc.latency, ModelJitter: tc.jitter, ToolRounds: tc.rounds}}
		s, err := agent.ParseSpec(b.spec())
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if len(s.Script) != tc.rounds+1 {
			t.Fatalf("%+v: %d replies, want %d", tc, len(s.Script), tc.rounds+1)
		}
		for i, r := range s.Script {
			if r.DelayMS != int(tc.latency.Milliseconds()) || r.DelayJitterMS != int(tc.jitter.Milliseconds()) {
				t.Errorf("%+v: script[%d] delay %d ± %d ms", tc, i, r.DelayMS, r.DelayJitterMS)
			}
		}
	}
}

// The steady rate counts the commits seen in [from, to), a second.
func TestSteadyRate(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)
	var seen []time.Time
	for i := range 10 {
		seen = append(seen, t0.Add(time.Duration(i)*time.Second))
	}
	if got := steadyRate(seen, t0.Add(5*time.Second), t0.Add(10*time.Second)); got != 1 {
		t.Errorf("5 commits in 5 s: %v a second, want 1", got)
	}
	// The start is in, the end is out.
	if got := steadyRate(seen, t0.Add(2*time.Second), t0.Add(4*time.Second)); got != 1 {
		t.Errorf("[2 s, 4 s): %v a second, want 1 (2 commits)", got)
	}
	if got := steadyRate(nil, t0, t0.Add(time.Second)); got != 0 {
		t.Errorf("none seen: %v", got)
	}
}
