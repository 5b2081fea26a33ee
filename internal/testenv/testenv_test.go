package testenv_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
)

// recorder is a testing.TB that records how the test ended; Fatalf and
// Skipf end the calling goroutine, as the real ones do.
type recorder struct {
	testing.TB
	ended string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.ended = "fatal: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.ended = "skip: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine and returns how it ended
// ("" when f returned).
func run(f func(testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.ended
}

func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	var calls atomic.Int32
	ended := run(func(tb testing.TB) {
		testenv.Eventually(tb, 10*time.Second, "three calls", func() bool { return calls.Add(1) >= 3 })
	})
	if ended != "" || calls.Load() != 3 {
		t.Fatalf("ended %q after %d calls, want a return after 3", ended, calls.Load())
	}
}

func TestEventuallyFailsAtDeadline(t *testing.T) {
	ended := run(func(tb testing.TB) {
		testenv.Eventually(tb, 20*time.Millisecond, "the impossible", func() bool { return false })
	})
	if want := "fatal: timed out after 20ms waiting for the impossible"; ended != want {
		t.Fatalf("ended %q, want %q", ended, want)
	}
}

func TestDockerUnavailableSkipsLocally(t *testing.T) {
	t.Setenv("RATH_REQUIRE_DOCKER", "")
	t.Setenv("CI", "")
	ended := run(func(tb testing.TB) { testenv.DockerUnavailable(tb, "no engine: %v", "refused") })
	if want := "skip: no engine: refused (set RATH_REQUIRE_DOCKER=1 to fail instead)"; ended != want {
		t.Fatalf("ended %q, want %q", ended, want)
	}
}

func TestDockerUnavailableFailsWhenRequired(t *testing.T) {
	for _, env := range [][2]string{{"RATH_REQUIRE_DOCKER", "1"}, {"CI", "true"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv("RATH_REQUIRE_DOCKER", "")
			t.Setenv("CI", "")
			t.Setenv(env[0], env[1])
			ended := run(func(tb testing.TB) { testenv.DockerUnavailable(tb, "no engine") })
			if want := "fatal: Docker required (RATH_REQUIRE_DOCKER=1 or CI=true) but unavailable: no engine"; ended != want {
				t.Fatalf("ended %q, want %q", ended, want)
			}
		})
	}
}
