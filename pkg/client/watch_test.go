package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
)

// sseEvent writes one server-sent event as the events endpoint does: an id
// line when id is not 0.
func sseEvent(w http.ResponseWriter, id uint64, typ string) {
	if id != 0 {
		fmt.Fprintf(w, "id: %d\n", id)
	}
	fmt.Fprintf(w, "event: %s\ndata: {\"run_id\":\"run_a\",\"type\":%q}\n\n", typ, typ)
}

// A stream cut inside a batch (a step's events stored as one message,
// whose id the server sends on its last event only) is reopened after the
// last id, and the server sends the batch again from its first event:
// WatchRun passes each event to fn once all the same.
func TestWatchRunResumesInsideABatch(t *testing.T) {
	var opens atomic.Int64
	var afters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		afters = append(afters, r.URL.Query().Get("after"))
		switch opens.Add(1) {
		case 1:
			sseEvent(w, 1, "run.submitted")
			// The batch's first two events, then the stream is cut.
			sseEvent(w, 0, "step.started")
			sseEvent(w, 0, "step.token")
		default:
			sseEvent(w, 0, "step.started")
			sseEvent(w, 0, "step.token")
			sseEvent(w, 0, "step.committed")
			sseEvent(w, 2, "run.completed")
		}
	}))
	defer srv.Close()
	cl, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	if err := cl.WatchRun(ctx, "run_a", client.WatchOptions{}, func(e api.Event) error {
		got = append(got, fmt.Sprintf("%s@%d", e.Type, e.ID))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := "run.submitted@1 step.started@0 step.token@0 step.committed@0 run.completed@2"; strings.Join(got, " ") != want {
		t.Errorf("events passed on: %v, want each once: %s", got, want)
	}
	if fmt.Sprint(afters) != "[ 1]" {
		t.Errorf("streams opened after %q, want from the start, then after 1", afters)
	}
}
