package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/rath-run/rath/internal/runs"
)

// RunAborts is implemented by an [Events] that can also tell the worker,
// at once, that a run was canceled or timed out (*bus.Bus does, over a
// core-NATS subscription). When the worker's Events implements it, Run
// subscribes once and aborts the run's steps in flight as soon as the event
// arrives; otherwise, and for any event lost on the way, the step's
// heartbeat Touch notices the run ended (within Config.Heartbeat).
type RunAborts interface {
	SubscribeRunAborts(fn func(runID string)) (stop func(), err error)
}

// errRunAborted is the cause of a step context ended by a run abort event.
// It wraps runs.ErrTerminal, as the Touch path's cause does.
var errRunAborted = fmt.Errorf("%w: run canceled or timed out (event)", runs.ErrTerminal)

// inflight maps run ids to the abort functions of their steps in flight.
// The zero value is ready to use.
type inflight struct {
	mu    sync.Mutex
	byRun map[string]map[*context.CancelCauseFunc]struct{}
}

// track registers abort as a step of runID until the returned func is
// called.
func (f *inflight) track(runID string, abort context.CancelCauseFunc) (untrack func()) {
	key := &abort
	f.mu.Lock()
	if f.byRun == nil {
		f.byRun = map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	set := f.byRun[runID]
	if set == nil {
		set = map[*context.CancelCauseFunc]struct{}{}
		f.byRun[runID] = set
	}
	set[key] = struct{}{}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.byRun[runID], key)
		if len(f.byRun[runID]) == 0 {
			delete(f.byRun, runID)
		}
	}
}

// abortRun aborts every step of runID in flight and returns how many.
func (f *inflight) abortRun(runID string) int {
	f.mu.Lock()
	set := f.byRun[runID]
	aborts := make([]context.CancelCauseFunc, 0, len(set))
	for a := range set {
		aborts = append(aborts, *a)
	}
	f.mu.Unlock()
	for _, a := range aborts {
		a(errRunAborted)
	}
	return len(aborts)
}

// subscribeAborts subscribes to run abort events when the worker's Events
// can (see [RunAborts]). It never fails the worker: without the
// subscription, Touch still aborts steps of ended runs.
func (w *Worker) subscribeAborts() (stop func()) {
	ra, ok := w.events.(RunAborts)
	if !ok {
		return func() {}
	}
	stop, err := ra.SubscribeRunAborts(func(runID string) {
		if n := w.aborts.abortRun(runID); n > 0 {
			w.log.Info("run ended; aborting its steps in flight", slog.String("run_id", runID), slog.Int("steps", n))
		}
	})
	if err != nil {
		w.log.Warn("no run abort subscription; steps of canceled runs stop at their next heartbeat", slog.Any("error", err))
		return func() {}
	}
	return stop
}
