package bus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
)

// SubscribeRunAborts reports the run of every run.canceled and
// run.timed_out event, and no other event; stop ends the reports.
func TestSubscribeRunAborts(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	got := make(chan string, 16)
	stop, err := b.SubscribeRunAborts(func(runID string) { got <- runID })
	if err != nil {
		t.Fatal(err)
	}
	publish := func(runID, typ string) {
		t.Helper()
		if err := b.PublishEvent(ctx, bus.Event{RunID: runID, Type: typ}); err != nil {
			t.Fatal(err)
		}
		if err := b.FlushEvents(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := func(runID string) {
		t.Helper()
		select {
		case id := <-got:
			if id != runID {
				t.Fatalf("abort for %q, want %q", id, runID)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no abort for %q within 5s", runID)
		}
	}
	// Other events first: had they been reported, they would come first.
	publish("run-a", bus.EventStepStarted)
	publish("run-a", bus.EventRunCompleted)
	publish("run-a", bus.EventRunFailed)
	publish("run-b", bus.EventRunCanceled)
	want("run-b")
	publish("run-c", bus.EventRunTimedOut)
	want("run-c")
	stop()
	publish("run-d", bus.EventRunCanceled)
	// A marker through a fresh subscription: once it arrived, run-d's
	// event (published before it) has been routed too.
	marker := make(chan string, 1)
	stop2, err := b.SubscribeRunAborts(func(runID string) { marker <- runID })
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	publish("run-e", bus.EventRunCanceled)
	select {
	case <-marker:
	case <-time.After(5 * time.Second):
		t.Fatal("no marker")
	}
	select {
	case id := <-got:
		t.Fatalf("abort for %q after stop", id)
	default:
	}
	if _, err := b.SubscribeRunAborts(nil); err == nil {
		t.Error("nil handler accepted")
	}
}

func TestRunIDFromAbortSubject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ subject, runID, err string }{
		{"rath.events.run-1.run.canceled", "run-1", ""},
		{"rath.events.R_2.run.timed_out", "R_2", ""},
		{"rath.events.run-1.run.completed", "", "want a run.canceled or run.timed_out event"},
		{"rath.jobs.run-1.run.canceled", "", "want the prefix rath.events."},
		{"rath.events..run.canceled", "", `subject "rath.events..run.canceled"`},
		{"rath.events.a.b.run.canceled", "", `subject "rath.events.a.b.run.canceled"`},
	} {
		id, err := bus.RunIDFromAbortSubject(tc.subject)
		if tc.err == "" {
			if err != nil || id != tc.runID {
				t.Errorf("%s: %q, %v; want %q", tc.subject, id, err, tc.runID)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %q, %v; want an error containing %q", tc.subject, id, err, tc.err)
		}
	}
}

// FuzzRunIDFromAbortSubject: never panics; an accepted subject is the
// abort subject of the run id it returns.
func FuzzRunIDFromAbortSubject(f *testing.F) {
	for _, s := range []string{"rath.events.run-1.run.canceled", "rath.events.x.run.timed_out",
		"rath.events..run.canceled", "rath.events.a.b.run.canceled", "rath.events.run.canceled", "", "rath.events.", "rath.events.ü.run.canceled"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		id, err := bus.RunIDFromAbortSubject(subject)
		if err != nil {
			return
		}
		if subject != bus.EventSubject(id, bus.EventRunCanceled) && subject != bus.EventSubject(id, bus.EventRunTimedOut) {
			t.Fatalf("%q accepted as run %q", subject, id)
		}
	})
}
