// Package testenv holds the test gates and waits shared by the module's
// tests.
//
// Gates: RequireDocker is the one Docker gate. Without a reachable Docker
// Engine (or a required image) the test is skipped, unless
// RATH_REQUIRE_DOCKER=1 or CI=true, when it fails: a component CI needs is
// never skipped quietly.
//
// Waits: Eventually polls a condition on a ticker with a deadline, failing
// the test when the deadline passes; tests never sleep to wait.
//
// Links: Proxy is a TCP proxy whose link a test cuts and heals, for a
// server (NATS, Postgres) going away and coming back.
package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// pollInterval is how often Eventually re-checks its condition.
const pollInterval = 5 * time.Millisecond

// RequireDocker returns when a Docker Engine answers a ping and every image
// in images exists locally. Otherwise it skips t, or fails it when
// RATH_REQUIRE_DOCKER=1 or CI=true.
func RequireDocker(t testing.TB, images ...string) {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		DockerUnavailable(t, "docker client: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		DockerUnavailable(t, "no Docker Engine: %v", err)
	}
	for _, ref := range images {
		if _, err := cli.ImageInspect(ctx, ref); err != nil {
			DockerUnavailable(t, "image %s missing (scripts/sandbox-image.sh builds it): %v", ref, err)
		}
	}
}

// DockerUnavailable ends t for a Docker setup that is not there: a skip,
// or a failure when RATH_REQUIRE_DOCKER=1 or CI=true. It is the policy
// RequireDocker applies, for tests that probe the Engine once (in
// TestMain) and report the outcome per test.
func DockerUnavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if DockerRequired() {
		t.Fatalf("Docker required (RATH_REQUIRE_DOCKER=1 or CI=true) but unavailable: "+format, args...)
	}
	t.Skipf(format+" (set RATH_REQUIRE_DOCKER=1 to fail instead)", args...)
}

// DockerRequired reports whether the environment demands Docker tests run:
// RATH_REQUIRE_DOCKER=1 or CI=true.
func DockerRequired() bool {
	return os.Getenv("RATH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true"
}

// Eventually polls cond every few milliseconds until it holds, failing t
// with what (a description of the awaited state) when timeout passes first.
// cond is checked once before the first tick.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-tick.C:
			if cond() {
				return
			}
		}
	}
}
