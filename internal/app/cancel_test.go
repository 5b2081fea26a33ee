package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
)

// blockingModel is a fake OpenAI endpoint that never answers: each request
// blocks until its context ends, which is recorded.
type blockingModel struct {
	srv      *httptest.Server
	started  chan time.Time // one per request, when it arrived
	canceled chan time.Time // one per request, when its context ended
	requests atomic.Int32
}

func newBlockingModel(t *testing.T) *blockingModel {
	m := &blockingModel{started: make(chan time.Time, 16), canceled: make(chan time.Time, 16)}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body: only then does the server watch the connection
		// and cancel the request's context when the client goes away.
		_, _ = io.Copy(io.Discard, r.Body)
		m.requests.Add(1)
		m.started <- time.Now()
		<-r.Context().Done()
		m.canceled <- time.Now()
	}))
	t.Cleanup(func() {
		m.srv.CloseClientConnections()
		m.srv.Close()
	})
	return m
}

// TestCancelAbortsStepAtOnce: canceling a run whose step is blocked in a
// model call aborts that call within well under the worker's heartbeat
// (5 s on the dev stack, where Touch would notice): the worker hears the
// coordinator's run.canceled event (bus.SubscribeRunAborts) and ends the
// step's context at once. The model request's context is canceled, the
// run ends canceled, and the step is not run again.
func TestCancelAbortsStepAtOnce(t *testing.T) {
	t.Parallel()
	m := newBlockingModel(t)
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": m.srv.URL + "/v1"}
	s := startDev(t, "", app.DevConfig{Workers: 1, Getenv: func(k string) string { return env[k] }})
	ctx := context.Background()

	r := s.submit(t, `{"name":"slow","model":"gpt-test"}`, "take your time")
	select {
	case <-m.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the model was never called")
	}
	start := time.Now()
	var canceled runs.Run
	if err := s.cl.Do(ctx, "POST", "/v1/runs/"+r.ID+"/cancel", nil, &canceled); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	var at time.Time
	select {
	case at = <-m.canceled:
	case <-time.After(30 * time.Second):
		t.Fatal("the model request was not canceled within 30s")
	}
	latency := at.Sub(start)
	t.Logf("cancel → model request canceled: %s (heartbeat 5s)", latency)
	// Well under the 5 s heartbeat; the margin is for a loaded machine.
	if latency > 2*time.Second {
		t.Errorf("model request canceled %s after the cancel; want well under the 5s heartbeat", latency)
	}
	got := s.waitRun(t, r.ID)
	if got.Status != runs.RunCanceled {
		t.Fatalf("run %s, want canceled", got.Status)
	}
	for _, st := range got.Steps {
		if st.Status == runs.StepCommitted || st.Status == runs.StepRunning {
			t.Errorf("step %s is %s after the cancel", st.Key, st.Status)
		}
	}
	// The aborted delivery is handed back; its redelivery finds the step
	// ended and acks it without calling the model again.
	s.drained(t)
	if n := m.requests.Load(); n != 1 {
		b, _ := json.Marshal(got)
		t.Errorf("%d model requests, want 1 (run %s)", n, b)
	}
}
