package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/service"
	"github.com/rath-run/rath/pkg/session"
)

// leaseRelease bounds the release of a lease when a service stops.
const leaseRelease = 5 * time.Second

// Reconciler is the service that finds lost steps: while this replica
// holds the "reconciler" lease it runs a pass ([Reconciler.ReconcileOnce])
// every Config.ReconcileInterval. Each pass finds unfinished steps that
// have not been touched for StaleAfter: a step whose version is already
// committed (its ack or record was lost) is settled; a step whose job is
// still in its queue (waiting behind a backlog, or due for redelivery) is
// left to JetStream; any other has its job republished. Republishing is
// safe because commits are idempotent on the step id; checking the queue
// first keeps a backlog from turning into duplicate executions.
//
// Stop ends a pass in progress at its next store or bus call (what it has
// not reached stays stale, for the next pass: nothing is lost) and
// releases the lease, so that another replica takes reconciling over at
// once instead of after Config.LeaseTTL.
type Reconciler struct {
	service.Base
	c *Coordinator
}

// Start implements [service.Service].
func (rc *Reconciler) Start(ctx context.Context) error {
	return rc.Go(ctx, rc.run)
}

func (rc *Reconciler) run(ctx context.Context) {
	c := rc.c
	defer releaseLease(ctx, c, "reconciler")
	t := time.NewTicker(c.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		leader, err := c.runs.AcquireLease(ctx, "reconciler", c.cfg.Name, c.cfg.LeaseTTL)
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "reconciler lease", slog.Any("error", err))
		}
		if leader {
			if n, err := rc.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "reconcile pass", slog.Any("error", err))
			} else if n > 0 {
				c.log.InfoContext(ctx, "reconciled steps", slog.Int("count", n))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// releaseLease gives the named lease up as a service stops (its ctx has
// ended), so that another replica takes the work over at once.
func releaseLease(ctx context.Context, c *Coordinator, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseRelease)
	defer cancel()
	if err := c.runs.ReleaseLease(ctx, name, c.cfg.Name); err != nil {
		c.log.WarnContext(ctx, "release lease on stop; it passes on when it expires", slog.String("lease", name), slog.Any("error", err))
	}
}

// ReconcileOnce runs one reconciliation pass, lease or not, and returns how
// many steps it settled or republished.
func (rc *Reconciler) ReconcileOnce(ctx context.Context) (int, error) {
	c := rc.c
	stale, err := c.runs.Stale(ctx, time.Now().Add(-c.cfg.StaleAfter), 500)
	if err != nil {
		return 0, err
	}
	n := 0
	queued := map[string]map[string]bool{}
	for _, st := range stale {
		v, err := c.graph.GetByKey(ctx, st.ID)
		switch {
		case err == nil:
			r, err := c.runs.CommitStep(ctx, st.ID, v.ID)
			if err != nil {
				return n, err
			}
			c.event(ctx, bus.Event{RunID: st.RunID, StepID: st.ID, Type: "step.committed", Data: mustJSON(map[string]any{"version": v.ID})})
			if r.Status.Terminal() {
				c.event(ctx, runEndEvent(r))
			}
		case errors.Is(err, session.ErrNotFound):
			r, err := c.runs.Get(ctx, st.RunID)
			if err != nil {
				return n, err
			}
			inQueue, err := rc.inQueue(ctx, queued, r.Queue, st)
			if err != nil {
				return n, err
			}
			if inQueue {
				if err := c.runs.Touch(ctx, st.ID); err != nil && !errors.Is(err, runs.ErrTerminal) {
					return n, err
				}
				continue
			}
			// A fresh message id per reconcile interval gets past JetStream's
			// duplicate window when the original message is gone.
			msgID := fmt.Sprintf("%s/r%d", st.ID, time.Now().UnixNano()/int64(c.cfg.StaleAfter))
			if err := c.publishStep(ctx, c.sysGraph, r, st, msgID); err != nil {
				return n, err
			}
			if err := c.runs.Touch(ctx, st.ID); err != nil && !errors.Is(err, runs.ErrTerminal) {
				return n, err
			}
		default:
			return n, err
		}
		n++
	}
	return n, nil
}

// inQueue reports whether st's job is still in its queue and will be
// delivered by JetStream. The queue is read once per pass (cache). A job
// that has used up its deliveries is a dead letter: not in the queue for
// this purpose. When the queue holds more than QueueScanLimit jobs, a step
// not seen in the part read counts as queued: it is rechecked on the next
// pass, once the backlog has shrunk.
func (rc *Reconciler) inQueue(ctx context.Context, cache map[string]map[string]bool, queue string, st runs.Step) (bool, error) {
	c := rc.c
	if st.Attempts >= c.cfg.MaxDeliver {
		return false, nil
	}
	steps, ok := cache[queue]
	if !ok {
		var complete bool
		var err error
		steps, complete, err = c.bus.QueuedSteps(ctx, queue, c.cfg.QueueScanLimit)
		if err != nil {
			return false, fmt.Errorf("read queue %s: %w", queue, err)
		}
		if !complete {
			c.log.InfoContext(ctx, "reconciler: queue backlog exceeds the scan limit; deferring its stale steps",
				slog.String("queue", queue), slog.Int("limit", c.cfg.QueueScanLimit))
			steps = nil
		}
		cache[queue] = steps
	}
	if steps == nil {
		return true, nil
	}
	return steps[st.ID], nil
}
