package llm

import (
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
