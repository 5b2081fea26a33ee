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
