package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/session"
)

// Waiter is the part of the run store that records a step paused for
// approval; *runs.Store has it. A worker whose Steps lack it fails such a
// step, naming why.
type Waiter interface {
	WaitStep(ctx context.Context, stepID string, waiting session.ID) (runs.Run, error)
}

// waitIfPaused settles a delivery whose step paused for approval (err is an
// *agent.ApprovalError): the step and run are recorded waiting, step.waiting
// (and run.waiting when the whole run waits) are published, and the job is
// acked — it is done; the coordinator publishes the continuation once the
// calls are decided. It reports false, doing nothing, for any other err.
func (w *Worker) waitIfPaused(ctx context.Context, d *bus.Delivery, log *slog.Logger, job bus.Job, err error) bool {
	var ae *agent.ApprovalError
	if !errors.As(err, &ae) {
		return false
	}
	ws, ok := w.steps.(Waiter)
	if !ok {
		w.retryOrFail(ctx, d, log, permanent(fmt.Errorf("%w, and this worker's run store cannot record a waiting step", err)))
		return true
	}
	r, werr := ws.WaitStep(ctx, job.StepID, ae.Session.ID())
	switch {
	case errors.Is(werr, runs.ErrTerminal):
		// Canceled while it ran: nothing waits.
		log.InfoContext(ctx, "step ended while pausing for approval; acking", slog.Any("error", werr))
		w.ack(ctx, d, log)
		return true
	case werr != nil:
		// The waiting version is committed; a redelivery finds it by key.
		w.retryOrFail(ctx, d, log, fmt.Errorf("record wait: %w", werr))
		return true
	}
	data := mustJSON(map[string]any{"version": ae.Session.ID(), "pending": ae.Pending})
	es := []bus.Event{{RunID: job.RunID, StepID: job.StepID, Type: "step.waiting", Data: data}}
	if r.Status == runs.RunWaiting {
		es = append(es, bus.Event{RunID: job.RunID, StepID: job.StepID, Type: "run.waiting", Data: data})
	}
	w.publish(ctx, es...)
	w.ack(ctx, d, log)
	log.InfoContext(ctx, "step waiting for approval", slog.String("version", ae.Session.ID().String()), slog.Int("pending", len(ae.Pending)))
	return true
}
