package flow

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/session"
)

// Agent is the workflow of one agent: Forward is one step of [KindAgent]
// through the spec (the agent loop, on whichever worker or process the
// runtime chooses). It is a [Describer], so a selector can offer it.
type Agent struct {
	Spec agent.Spec
	// Desc describes the agent to a selector; the spec's name when empty.
	Desc string
}

// NewAgent returns the workflow of spec with a description for selectors.
func NewAgent(spec agent.Spec, description string) *Agent {
	return &Agent{Spec: spec, Desc: description}
}

// Forward runs one agent step on s.
func (a *Agent) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	return Do(ctx, Call{Kind: KindAgent, Agent: a.Spec}, s)
}

// Description implements [Describer].
func (a *Agent) Description() string {
	if a.Desc != "" {
		return a.Desc
	}
	return a.Spec.Name
}

// Compressor replaces a session's transcript with one summary chunk: one
// model call with tools off (OpenRath's run_session_compress). Spec gives
// the model and, as its instructions, the compressor's system prompt;
// Instruction is the final user message, [DefaultCompressInstruction] when
// empty. The output is a version of op compress whose parent is the
// compressed version and whose transcript is the summary alone.
type Compressor struct {
	Spec        agent.Spec
	Instruction string
	// Desc describes the compressor to a selector; the spec's name when
	// empty.
	Desc string
}

// Forward runs one compress step on s.
func (c *Compressor) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	return Do(ctx, Call{Kind: KindCompress, Agent: c.Spec, Instruction: c.Instruction}, s)
}

// Description implements [Describer].
func (c *Compressor) Description() string {
	if c.Desc != "" {
		return c.Desc
	}
	return c.Spec.Name
}

// Empty is the identity workflow: Forward returns its input unchanged. A
// selector returns [EmptyWorkflow] when the model chooses no candidate.
type Empty struct{}

// EmptyWorkflow is the identity workflow a selector returns for "none".
// Compare a selector's choice with [IsEmpty].
var EmptyWorkflow Workflow = Empty{}

// Forward returns s.
func (Empty) Forward(_ context.Context, s session.Session) (session.Session, error) { return s, nil }

// Description implements [Describer].
func (Empty) Description() string { return "do nothing" }

// IsEmpty reports whether w is the identity workflow.
func IsEmpty(w Workflow) bool {
	switch w.(type) {
	case Empty, *Empty:
		return true
	}
	return false
}

// Sequence forwards through each workflow in order, each getting the
// previous one's output.
type Sequence []Workflow

// Seq returns the sequence of ws.
func Seq(ws ...Workflow) Sequence { return Sequence(ws) }

// Forward runs the workflows in order; the first error stops it.
func (q Sequence) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	for i, w := range q {
		if w == nil {
			return session.Session{}, fmt.Errorf("flow: sequence[%d] is nil", i)
		}
		out, err := w.Forward(ctx, s)
		if err != nil {
			return session.Session{}, err
		}
		s = out
	}
	return s, nil
}

// MergeKey is the key of the fan-in merge of b onto a: derived from the
// two versions it merges, so only a merge of exactly those versions can
// hold it. It is the one key a client may give a version it commits
// through the coordinator's API (step keys are the system's).
func MergeKey(a, b session.ID) string { return "merge/" + a.String() + "+" + b.String() }

// Parallel is a fan-out with fan-in: it forks the input once per branch,
// runs every branch's workflow on its fork in its own goroutine and key
// scope ([Branch]), and merges the branch outputs in branch order onto the
// first, each as soon as it and the branches before it have ended (so the
// fan-in overlaps the slower branches). A merge takes only what each branch added since the fork
// ([session.Session.Merge]), so the shared history appears once.
//
// The fan-out takes one key of its scope, so workflows nesting Parallels
// stay deterministic. Merges are keyed by the two versions they merge, so
// a durable run re-executing a fan-out whose branches already committed
// gets the same merged version back (the forks are recorded again: one
// small row each). The first branch error cancels the other branches
// and is returned (wrapped with the branch index); the output is then zero.
// A merge that fails does the same.
type Parallel struct {
	Branches []Workflow
	// Limit bounds how many branches run at once; 0 runs them all.
	Limit int
}

// Par returns the parallel composition of ws, all branches at once.
func Par(ws ...Workflow) *Parallel { return &Parallel{Branches: ws} }

// Fanout returns a Parallel of n copies of w: the same workflow on n forks
// of the input, each branch with its own keys (so n agent steps, not one).
func Fanout(n int, w Workflow) *Parallel {
	bs := make([]Workflow, n)
	for i := range bs {
		bs[i] = w
	}
	return &Parallel{Branches: bs}
}

// Forward forks s, runs the branches and merges their outputs.
func (p *Parallel) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	n := len(p.Branches)
	if n == 0 {
		return s, nil
	}
	if p.Limit < 0 {
		return session.Session{}, fmt.Errorf("flow: parallel: limit %d is negative", p.Limit)
	}
	for i, w := range p.Branches {
		if w == nil {
			return session.Session{}, fmt.Errorf("flow: parallel: branch %d is nil", i)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	scopes := Branches(ctx, n)
	limit := p.Limit
	if limit == 0 || limit > n {
		limit = n
	}
	var (
		mu       sync.Mutex // guards firstErr
		firstErr error
	)
	// fail records the first failure (a branch's or a merge's) and cancels
	// the rest; what fails after it, canceled, is not reported.
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel(err)
	}
	outs := make([]session.Session, n)
	// ended[i] is closed when branch i has ended: outs[i] is set, or it
	// failed (ctx is canceled before it is closed).
	ended := make([]chan struct{}, n)
	for i := range ended {
		ended[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	launched := make(chan struct{})
	go func() {
		defer close(launched)
		sem := make(chan struct{}, limit)
		for i, w := range p.Branches {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				defer close(ended[i])
				out, err := runBranch(scopes[i], i, w, s)
				if err != nil {
					fail(err)
					return
				}
				outs[i] = out
			}()
		}
	}()
	// Merge in branch order as the branches end, while later ones still
	// run: the fan-in does not wait for the slowest branch to start, and
	// the merges are the same (and keyed the same) whatever the timing.
	var out session.Session
merging:
	for i := range n {
		select {
		case <-ended[i]:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break merging
		}
		switch {
		case i == 0:
			out = outs[0]
		case outs[i].ID() == out.ID():
		default:
			// Keyed by its inputs: re-executing the fan-out over the same
			// committed branch outputs gets the same merge back.
			m, err := out.MergeKeyed(ctx, outs[i], MergeKey(out.ID(), outs[i].ID()))
			if err != nil {
				fail(fmt.Errorf("flow: parallel: merge branch %d: %w", i, err))
				break merging
			}
			out = m
		}
	}
	<-launched
	wg.Wait()
	if firstErr != nil {
		return session.Session{}, firstErr
	}
	if err := context.Cause(ctx); err != nil {
		return session.Session{}, fmt.Errorf("flow: parallel: %w", err)
	}
	return out, nil
}

// runBranch forks s and runs w on the fork.
func runBranch(ctx context.Context, i int, w Workflow, s session.Session) (session.Session, error) {
	f, err := s.Fork(ctx)
	if err != nil {
		return session.Session{}, fmt.Errorf("flow: parallel: fork branch %d: %w", i, err)
	}
	out, err := w.Forward(ctx, f)
	if err != nil {
		return session.Session{}, fmt.Errorf("branch %d: %w", i, err)
	}
	if out.IsZero() {
		return session.Session{}, fmt.Errorf("branch %d: %w", i, errors.New("workflow returned a zero session"))
	}
	return out, nil
}
