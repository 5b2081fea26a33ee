package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
)

// Reviewer is the part of the run store that records a step stopped on
// an ambiguous tool call; *runs.Store has it. A worker whose Steps lack it
// fails such a step, naming the call.
type Reviewer interface {
	NeedsReview(ctx context.Context, stepID string, round int, callID, worker string, data []byte) (runs.Run, error)
}

// reviewIfAmbiguous settles a delivery whose step stopped on an ambiguous
// call (err is an *agent.AmbiguousError): the call is recorded in the
// step's journal, the step waits for a review (its run too, when nothing
// else of it runs), step.needs_review (and run.needs_review) are published
// with the call, and the job is acked — the coordinator publishes the
// step again once a review decides. It reports false, doing nothing, for
// any other err.
func (w *Worker) reviewIfAmbiguous(ctx context.Context, d *bus.Delivery, log *slog.Logger, job bus.Job, err error) bool {
	var amb *agent.AmbiguousError
	if !errors.As(err, &amb) {
		return false
	}
	rv, ok := w.steps.(Reviewer)
	if !ok {
		w.retryOrFail(ctx, d, log, permanent(fmt.Errorf("%w, and this worker's run store cannot record a review", err)))
		return true
	}
	data := mustJSON(amb)
	r, rerr := rv.NeedsReview(ctx, job.StepID, amb.Round, amb.CallID, w.cfg.Name, data)
	switch {
	case errors.Is(rerr, runs.ErrTerminal):
		log.InfoContext(ctx, "step ended while stopping for a review; acking", slog.Any("error", rerr))
		w.ack(ctx, d, log)
		return true
	case rerr != nil:
		// Nothing ran; a redelivery finds the call ambiguous again.
		w.retryOrFail(ctx, d, log, fmt.Errorf("record needs review: %w", rerr))
		return true
	}
	es := []bus.Event{{RunID: job.RunID, StepID: job.StepID, Type: api.EventStepNeedsReview, Data: data}}
	if r.Status == runs.RunWaiting {
		es = append(es, bus.Event{RunID: job.RunID, StepID: job.StepID, Type: api.EventRunNeedsReview, Data: data})
	}
	w.publish(ctx, es...)
	w.ack(ctx, d, log)
	log.WarnContext(ctx, "step needs a review: ambiguous tool call", slog.String("call_id", amb.CallID),
		slog.String("tool", amb.Tool), slog.Int("round", amb.Round), slog.String("started_on", amb.Worker))
	return true
}
