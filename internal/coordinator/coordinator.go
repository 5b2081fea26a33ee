// Package coordinator is Rath's control plane: an HTTP JSON API over the
// Session Graph and runs, the publisher of step jobs, and the reconciler
// that republishes steps whose jobs were lost.
//
// The coordinator is stateless apart from Postgres (or the embedded store)
// and JetStream, so several replicas may run; only the holder of the
// "reconciler" lease reconciles. docs/api.md documents the API.
package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Config configures a Coordinator. Zero values take the defaults.
type Config struct {
	// Name identifies this replica for the reconciler lease; default host-pid.
	Name string
	// Queue is the default job queue; default "default".
	Queue string
	// Token, when set, is the bearer token every /v1 request must carry.
	Token string
	// MaxBodyBytes bounds a request body; default 1 MiB.
	MaxBodyBytes int64
	// ReconcileInterval is how often the leader scans for lost steps;
	// default 10s.
	ReconcileInterval time.Duration
	// StaleAfter is how long an unfinished step may go without an update
	// (workers touch running steps every heartbeat) before the reconciler
	// republishes its job; default 2m.
	StaleAfter time.Duration
	// LeaseTTL is the reconciler lease's lifetime; default 3 ×
	// ReconcileInterval.
	LeaseTTL time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d", cmp.Or(host, "coordinator"), os.Getpid())
	}
	c.Queue = cmp.Or(c.Queue, "default")
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 1<<20)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, 10*time.Second)
	c.StaleAfter = cmp.Or(c.StaleAfter, 2*time.Minute)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, 3*c.ReconcileInterval)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Bus is the part of the message bus the coordinator uses.
type Bus interface {
	Publish(ctx context.Context, job bus.Job, hdr nats.Header) (bool, error)
	PublishEvent(ctx context.Context, e bus.Event) error
	WatchRun(ctx context.Context, runID string) (<-chan bus.Event, func() error, error)
}

// Coordinator serves the API and drives runs.
type Coordinator struct {
	cfg   Config
	graph store.Store
	runs  *runs.Store
	bus   Bus
	log   *slog.Logger
}

// New returns a coordinator over a migrated store, its run store and a bus.
func New(graph store.Store, rs *runs.Store, b Bus, cfg Config) (*Coordinator, error) {
	if graph == nil || rs == nil || b == nil {
		return nil, errors.New("coordinator: store, run store and bus are required")
	}
	cfg = cfg.WithDefaults()
	return &Coordinator{cfg: cfg, graph: graph, runs: rs, bus: b, log: cfg.Logger}, nil
}

// SubmitRequest is the body of POST /v1/runs: forward a session (an existing
// version, or a new one holding Message) through an agent.
type SubmitRequest struct {
	Agent json.RawMessage `json:"agent"`
	// Message starts a new session holding one user message.
	Message string `json:"message,omitempty"`
	// Session forwards an existing version.
	Session string `json:"session,omitempty"`
	// Queue selects the job queue; default the coordinator's.
	Queue string `json:"queue,omitempty"`
}

// ErrBadRequest marks errors in what a client sent.
var ErrBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// Submit validates a request, records the run and its first step, and
// publishes the step's job. A publish failure leaves the step pending for the
// reconciler; the run is durable once Submit returns.
func (c *Coordinator) Submit(ctx context.Context, req SubmitRequest) (runs.Run, error) {
	if len(req.Agent) == 0 {
		return runs.Run{}, badRequest("agent: required")
	}
	spec, err := agent.ParseSpec(req.Agent)
	if err != nil {
		return runs.Run{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if spec.ScriptFile != "" {
		return runs.Run{}, badRequest("agent.script_file: the coordinator cannot read your files; inline the replies as script (rathctl does this)")
	}
	queue := cmp.Or(req.Queue, c.cfg.Queue)
	if err := bus.ValidQueue(queue); err != nil {
		return runs.Run{}, fmt.Errorf("%w: queue: %w", ErrBadRequest, err)
	}
	var input session.ID
	switch {
	case req.Message != "" && req.Session != "":
		return runs.Run{}, badRequest("give message or session, not both")
	case req.Message != "":
		s, err := session.FromUserMessage(ctx, c.graph, req.Message)
		if err != nil {
			return runs.Run{}, fmt.Errorf("create session: %w", err)
		}
		input = s.ID()
	case req.Session != "":
		id, err := session.ParseID(req.Session)
		if err != nil {
			return runs.Run{}, badRequest("session: %v", err)
		}
		if _, err := c.graph.Get(ctx, id); err != nil {
			if errors.Is(err, session.ErrNotFound) {
				return runs.Run{}, badRequest("session: no version %s", id)
			}
			return runs.Run{}, err
		}
		input = id
	default:
		return runs.Run{}, badRequest("message or session: one is required")
	}
	target, err := json.Marshal(spec)
	if err != nil {
		return runs.Run{}, err
	}
	r := runs.Run{ID: runs.NewRunID(), Queue: queue, Target: target, Input: input}
	if err := c.runs.Create(ctx, &r, []runs.Step{{Ordinal: 0, Input: input}}); err != nil {
		return runs.Run{}, fmt.Errorf("record run: %w", err)
	}
	st := r.Steps[0]
	if err := c.publishStep(ctx, r, st, st.ID); err != nil {
		c.log.WarnContext(ctx, "publish failed; the reconciler will retry", slog.String("step_id", st.ID), slog.Any("error", err))
	}
	c.event(ctx, bus.Event{RunID: r.ID, Type: "run.submitted", Data: mustJSON(map[string]any{"input": input, "agent": spec.Name})})
	return r, nil
}

func (c *Coordinator) publishStep(ctx context.Context, r runs.Run, st runs.Step, msgID string) error {
	job := bus.Job{
		V: bus.JobVersion, StepID: st.ID, RunID: r.ID, Queue: r.Queue,
		Input: st.Input.String(), Target: r.Target, CreatedAt: time.Now().UTC(),
	}
	hdr := nats.Header{}
	if msgID != st.ID {
		// Publish keeps a message id the caller set (republish).
		hdr.Set(bus.HeaderMsgID, msgID)
	}
	_, err := c.bus.Publish(ctx, job, hdr)
	return err
}

// Cancel cancels a run.
func (c *Coordinator) Cancel(ctx context.Context, runID string) (runs.Run, error) {
	r, err := c.runs.Cancel(ctx, runID)
	if err != nil {
		return runs.Run{}, err
	}
	c.event(ctx, bus.Event{RunID: r.ID, Type: "run.canceled"})
	return r, nil
}

// RunReconciler reconciles while this replica holds the lease, until ctx
// ends. Each pass finds unfinished steps that have not been touched for
// StaleAfter: a step whose version is already committed (its ack or record
// was lost) is settled; any other has its job republished. Republishing is
// safe because commits are idempotent on the step id.
func (c *Coordinator) RunReconciler(ctx context.Context) error {
	t := time.NewTicker(c.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		leader, err := c.runs.AcquireLease(ctx, "reconciler", c.cfg.Name, c.cfg.LeaseTTL)
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "reconciler lease", slog.Any("error", err))
		}
		if leader {
			if n, err := c.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "reconcile pass", slog.Any("error", err))
			} else if n > 0 {
				c.log.InfoContext(ctx, "reconciled steps", slog.Int("count", n))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ReconcileOnce runs one reconciliation pass and returns how many steps it
// settled or republished.
func (c *Coordinator) ReconcileOnce(ctx context.Context) (int, error) {
	stale, err := c.runs.Stale(ctx, time.Now().Add(-c.cfg.StaleAfter), 500)
	if err != nil {
		return 0, err
	}
	n := 0
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
			// A fresh message id per reconcile interval gets past JetStream's
			// duplicate window when the original message is gone.
			msgID := fmt.Sprintf("%s/r%d", st.ID, time.Now().UnixNano()/int64(c.cfg.StaleAfter))
			if err := c.publishStep(ctx, r, st, msgID); err != nil {
				return n, err
			}
			if err := c.runs.Touch(ctx, st.ID); err != nil {
				return n, err
			}
		default:
			return n, err
		}
		n++
	}
	return n, nil
}

func runEndEvent(r runs.Run) bus.Event {
	typ := "run." + string(r.Status)
	if r.Status == runs.RunSucceeded {
		typ = "run.completed"
	}
	return bus.Event{RunID: r.ID, Type: typ, Data: mustJSON(map[string]any{"output": r.Output, "error": r.Error})}
}

func (c *Coordinator) event(ctx context.Context, e bus.Event) {
	e.Time = time.Now().UTC()
	if err := c.bus.PublishEvent(ctx, e); err != nil {
		c.log.DebugContext(ctx, "event not published", slog.String("type", e.Type), slog.Any("error", err))
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
