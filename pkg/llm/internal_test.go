package llm

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{"fraction", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"negative", http.Header{"Retry-After": {"-3"}}, 0},
		{"absurd", http.Header{"Retry-After": {"1e300"}}, 0},
		{"ms wins", http.Header{"Retry-After": {"7"}, "Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{"bad ms", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"x"}}, 2 * time.Second},
	}
	for _, c := range cases {
		if got := parseRetryAfter(c.h, now); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestBackoffFullJitter(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 200).Draw(t, "attempt")
		base := time.Duration(rapid.Int64Range(1, int64(time.Minute)).Draw(t, "base"))
		maxDelay := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "max"))
		d := backoff(n, base, maxDelay)
		ceiling := maxDelay
		if n-1 < 40 && base<<(n-1) > 0 && base<<(n-1) < maxDelay {
			ceiling = base << (n - 1)
		}
		if d < 0 || d > ceiling {
			t.Fatalf("backoff(%d, %s, %s) = %s, want within [0, %s]", n, base, maxDelay, d, ceiling)
		}
	})
}

func TestSplitWords(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.SampledFrom([]rune{'a', 'é', '界', ' ', '\n', '\t', 'z'})).Draw(t, "s")
		parts := splitWords(s)
		if strings.Join(parts, "") != s {
			t.Fatalf("pieces %q do not rebuild %q", parts, s)
		}
		if len(parts) != max(countWords(s), min(len(s), 1)) {
			t.Fatalf("%q: %d pieces for %d words", s, len(parts), countWords(s))
		}
	})
}

func TestRedact(t *testing.T) {
	t.Parallel()
	if got := redact("Bearer sk-abc and sk-abc", "sk-abc"); got != "Bearer [REDACTED] and [REDACTED]" {
		t.Errorf("redact = %q", got)
	}
	if got := redact("a b", ""); got != "a b" {
		t.Errorf("empty secret changed text: %q", got)
	}
	if got := truncate("ab界", 3); got != "ab…(truncated)" {
		t.Errorf("truncate = %q", got)
	}
}

// A reply's delay is delay_ms without jitter, and with it a uniform draw
// that reaches both ends of delay_ms ± delay_jitter_ms and never leaves it.
func TestScriptDelayJitter(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	if got := (ScriptReply{DelayMS: 500}).delay(rnd.Int64N); got != 500*time.Millisecond {
		t.Fatalf("no jitter: delay %s, want 500ms", got)
	}
	r := ScriptReply{DelayMS: 500, DelayJitterMS: 100}
	lo, hi := 400*time.Millisecond, 600*time.Millisecond
	minD, maxD, sum := time.Duration(1<<62), time.Duration(0), time.Duration(0)
	const n = 10_000
	for range n {
		d := r.delay(rnd.Int64N)
		if d < lo || d > hi {
			t.Fatalf("delay %s outside %s..%s", d, lo, hi)
		}
		minD, maxD, sum = min(minD, d), max(maxD, d), sum+d
	}
	if minD > lo+time.Millisecond || maxD < hi-time.Millisecond {
		t.Errorf("draws span %s..%s, want about %s..%s", minD, maxD, lo, hi)
	}
	if mean := sum / n; mean < 495*time.Millisecond || mean > 505*time.Millisecond {
		t.Errorf("mean delay %s, want about 500ms", mean)
	}
	// The ends themselves: the smallest and the largest draw.
	if got := r.delay(func(int64) int64 { return 0 }); got != lo {
		t.Errorf("smallest draw: %s, want %s", got, lo)
	}
	if got := r.delay(func(n int64) int64 { return n - 1 }); got != hi {
		t.Errorf("largest draw: %s, want %s", got, hi)
	}
}
