package selector

import (
	"context"
	"fmt"

	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// MaxLoopRounds bounds [Loop.MaxRounds].
const MaxLoopRounds = 100

// Loop is the bounded selector loop as a workflow: choose a candidate, run
// it, repeat, until the selector chooses none or MaxRounds candidates have
// run. Each round is one select step and, unless the choice is none, the
// chosen workflow's steps.
type Loop struct {
	Selector   *Selector
	Candidates []flow.Workflow
	// MaxRounds bounds the rounds: 1..[MaxLoopRounds].
	MaxRounds int
	// Desc describes the loop to an enclosing selector.
	Desc string
}

// Description implements [flow.Describer].
func (l *Loop) Description() string { return l.Desc }

// Forward runs the loop on s.
func (l *Loop) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	if l.Selector == nil {
		return session.Session{}, fmt.Errorf("selector loop: no selector")
	}
	if l.MaxRounds < 1 || l.MaxRounds > MaxLoopRounds {
		return session.Session{}, fmt.Errorf("selector loop %s: max_rounds %d is outside 1..%d", l.Selector.Spec.Name, l.MaxRounds, MaxLoopRounds)
	}
	for range l.MaxRounds {
		w, next, err := l.Selector.Select(ctx, s, l.Candidates...)
		if err != nil {
			return session.Session{}, err
		}
		s = next
		if flow.IsEmpty(w) {
			return s, nil
		}
		if s, err = w.Forward(ctx, s); err != nil {
			return session.Session{}, err
		}
	}
	return s, nil
}
