package flow

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/rath-run/rath/pkg/session"
)

// KeyGetter is implemented by graphs that can look a version up by its
// commit key (the stores of package store, and [session.MemoryGraph]).
type KeyGetter interface {
	GetByKey(ctx context.Context, key string) (*session.Version, error)
}

// MaxRunIDBytes bounds a run id.
const MaxRunIDBytes = 128

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidRunID checks a run id: [A-Za-z0-9_-], 1..[MaxRunIDBytes] bytes (it
// prefixes step ids and names event subjects).
func ValidRunID(run string) error {
	if len(run) == 0 || len(run) > MaxRunIDBytes || !runIDRE.MatchString(run) {
		return fmt.Errorf("flow: run id %q must match %s and be at most %d bytes", run, runIDRE, MaxRunIDBytes)
	}
	return nil
}

// StepID returns the id of the step key of run: "<run>/<key>". Both
// runtimes commit a step's version with its step id as the key.
func StepID(run, key string) string { return run + "/" + key }

// Local is the in-process runtime: it executes every step in the calling
// process with [Execute], committing to the graph of the step's input
// session. Use it in tests, notebooks and `rathctl dev`.
//
// Local is durable when the input's graph implements [KeyGetter]: a step
// whose id ([StepID] of the run and the key) already committed returns the
// committed version without executing again, so re-running a workflow with
// the same run id on the same store continues where the last run stopped.
// It is safe for concurrent use (fan-out branches call it at once).
type Local struct {
	run           string
	env           Env
	acceptChanges bool
}

// AcceptChanges makes l return a committed step even when the workflow now
// gives it another input: the in-process form of `rathctl runs resume RUN
// --accept-changes`. Call it before the first Step.
func (l *Local) AcceptChanges() { l.acceptChanges = true }

// sameInput checks that the committed step v of key was forwarded from
// what the workflow gives it now: the same input (by [InputIdentity], so a
// fan-out's fresh forks of the same content agree) through an agent of the
// same name. Local keeps no digest beside the version (that would change
// its hash), so a target whose name stayed while its spec changed is not
// caught here; the cluster runtimes, which record [StepDigest] with the
// step, catch that too.
func sameInput(ctx context.Context, in session.Session, key, stepID string, call Call, v *session.Version) error {
	if v.Base == nil {
		return nil // a compression's new root: its input is not its base
	}
	g := in.Graph()
	base := *v.Base
	if bv, err := g.Get(ctx, base); err == nil && bv.Key == PlaceKey(stepID) && bv.Base != nil {
		base = *bv.Base // the step ran on its placed input
	}
	recorded, err := InputIdentity(ctx, g, base)
	if err != nil {
		return fmt.Errorf("step %s: %w", stepID, err)
	}
	now, err := InputIdentity(ctx, g, in.ID())
	if err != nil {
		return fmt.Errorf("step %s: %w", stepID, err)
	}
	if call.Kind == KindAgent && v.Producer.Agent != "" && call.Agent.Name != "" && v.Producer.Agent != call.Agent.Name {
		recorded, now = recorded+" agent "+v.Producer.Agent, now+" agent "+call.Agent.Name
	}
	return CheckDigest(key, recorded, now)
}

// NewLocal returns the in-process runtime of run; env.Resolve is required.
func NewLocal(run string, env Env) (*Local, error) {
	if err := ValidRunID(run); err != nil {
		return nil, err
	}
	if env.Resolve == nil {
		return nil, errors.New("flow: local runtime: Env.Resolve is required")
	}
	env.Producer.Run = run
	return &Local{run: run, env: env}, nil
}

// Run returns the run id.
func (l *Local) Run() string { return l.run }

// Step implements [Runtime].
func (l *Local) Step(ctx context.Context, key string, call Call, in session.Session) (session.Session, error) {
	if in.IsZero() {
		return session.Session{}, errors.New("flow: local step: input session is zero")
	}
	id := StepID(l.run, key)
	if kg, ok := in.Graph().(KeyGetter); ok {
		v, err := kg.GetByKey(ctx, id)
		switch {
		case err == nil:
			if !l.acceptChanges {
				if err := sameInput(ctx, in, key, id, call, v); err != nil {
					return session.Session{}, err
				}
			}
			return session.Wrap(in.Graph(), v), nil
		case !errors.Is(err, session.ErrNotFound):
			return session.Session{}, fmt.Errorf("look up step %s: %w", id, err)
		}
	}
	in, err := Placed(ctx, call, in, id)
	if err != nil {
		return session.Session{}, err
	}
	env := l.env
	env.Producer.Step = id
	return Execute(ctx, env, id, call, in)
}
