package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/rath-run/rath/pkg/session"
)

// Rollout forks its input once per branch, runs each branch's agent on its
// fork, and scores each branch's output with the verifier: a [KindVerify]
// step that runs the verifier's command in the branch's workspace and
// records the score as a label chunk on a version extending the branch's
// output (the chunk `rathctl label --score` writes, by "verifier"). A batch
// of tasks rolled out this way is a graph of scored sibling branches that
// `rathctl export pairs` turns into preference pairs.
//
// The output is the best branch's agent output: the highest score, the
// first branch on a tie. Branches are not merged. Keys are taken as by
// [Parallel] (one for the rollout, then "<k>.b<i>.1" for branch i's agent
// step and "<k>.b<i>.2" for its verify step), so a re-executed rollout
// returns its committed steps without running an agent or a verifier again.
//
// With a Selector, a judge then chooses among the branches: one select
// step (the rollout's next key) on the rollout's input, whose menu lists
// each branch's agent and final reply and whose decision records the
// branch versions ([Call.Branches]); the output is the chosen branch (the
// best score when it chooses none). Either a verifier or a selector is
// required; with only a selector no verify steps run.
type Rollout struct {
	Branches []*Agent
	// Verifier scores each branch; a zero Verifier (no command) runs none.
	Verifier Verifier
	// Selector, when set, chooses among the branches after they ran.
	Selector *Agent
	// Limit bounds how many branches run at once; 0 runs them all.
	Limit int
}

// RolloutResult is one branch of a rollout: the agent's output, the
// verify step's version holding its score (zero without a verifier), and
// whether the selector chose it.
type RolloutResult struct {
	Output   session.Session
	Scored   session.Session
	Score    float64
	Selected bool
}

// Forward runs the rollout and returns the best branch's output.
func (r *Rollout) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	res, err := r.Run(ctx, s)
	if err != nil {
		return session.Session{}, err
	}
	best := 0
	for i := range res {
		if res[i].Selected {
			return res[i].Output, nil
		}
		if res[i].Score > res[best].Score {
			best = i
		}
	}
	return res[best].Output, nil
}

// Run runs the rollout and returns every branch's result, in branch order.
func (r *Rollout) Run(ctx context.Context, s session.Session) ([]RolloutResult, error) {
	n := len(r.Branches)
	if n == 0 {
		return nil, errors.New("flow: rollout: no branches")
	}
	if r.Limit < 0 {
		return nil, fmt.Errorf("flow: rollout: limit %d is negative", r.Limit)
	}
	switch {
	case r.Verifier.Command == "" && r.Selector == nil:
		return nil, errors.New("flow: rollout: give a verifier, a selector or both")
	case r.Verifier.Command != "":
		if err := r.Verifier.Validate(); err != nil {
			return nil, fmt.Errorf("flow: rollout: verifier.%w", err)
		}
	}
	if n > MaxCandidates && r.Selector != nil {
		return nil, fmt.Errorf("flow: rollout: a selector chooses among at most %d branches, not %d", MaxCandidates, n)
	}
	for i, a := range r.Branches {
		if a == nil {
			return nil, fmt.Errorf("flow: rollout: branch %d is nil", i)
		}
	}
	limit := r.Limit
	if limit == 0 || limit > n {
		limit = n
	}
	// The first branch to fail cancels the others and is the error.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	scopes := Branches(gctx, n)
	out := make([]RolloutResult, n)
	for i, a := range r.Branches {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			res, err := r.branch(scopes[i], i, a, s)
			if err != nil {
				return err
			}
			out[i] = res
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("flow: rollout: %w", err)
	}
	if r.Selector != nil {
		if err := r.choose(ctx, s, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxReplyInMenu bounds the final reply a selector's menu shows per branch.
const maxReplyInMenu = 3000

// choose asks the selector which branch is best and marks it Selected.
func (r *Rollout) choose(ctx context.Context, s session.Session, res []RolloutResult) error {
	descs := make([]string, len(res))
	ids := make([]session.ID, len(res))
	for i := range res {
		reply := "(no reply)"
		chunks, err := res[i].Output.Chunks(ctx)
		if err != nil {
			return fmt.Errorf("flow: rollout: branch %d: %w", i, err)
		}
		for j := len(chunks) - 1; j >= 0; j-- {
			if chunks[j].Kind() == session.KindAssistant && strings.TrimSpace(chunks[j].Text()) != "" {
				reply = clip(chunks[j].Text(), maxReplyInMenu)
				break
			}
		}
		descs[i] = fmt.Sprintf("branch %d (%s): %s", i, r.Branches[i].Spec.Name, reply)
		ids[i] = res[i].Output.ID()
	}
	out, err := Do(ctx, Call{Kind: KindSelect, Agent: r.Selector.Spec, Candidates: descs, Branches: ids}, s)
	if err != nil {
		return fmt.Errorf("flow: rollout: select: %w", err)
	}
	d, err := DecisionOf(out)
	if err != nil {
		return fmt.Errorf("flow: rollout: %w", err)
	}
	if d.Choice >= 0 && d.Choice < len(res) {
		res[d.Choice].Selected = true
	}
	return nil
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// branch forks s, runs a on the fork and verifies its output.
func (r *Rollout) branch(ctx context.Context, i int, a *Agent, s session.Session) (RolloutResult, error) {
	f, err := s.Fork(ctx)
	if err != nil {
		return RolloutResult{}, fmt.Errorf("flow: rollout: fork branch %d: %w", i, err)
	}
	o, err := a.Forward(ctx, f)
	if err != nil {
		return RolloutResult{}, fmt.Errorf("rollout branch %d: %w", i, err)
	}
	if r.Verifier.Command == "" {
		return RolloutResult{Output: o}, nil
	}
	v := r.Verifier
	scored, err := Do(ctx, Call{Kind: KindVerify, Agent: a.Spec, Verifier: &v}, o)
	if err != nil {
		return RolloutResult{}, fmt.Errorf("rollout branch %d: verify: %w", i, err)
	}
	score, err := ScoreOf(scored)
	if err != nil {
		return RolloutResult{}, fmt.Errorf("rollout branch %d: %w", i, err)
	}
	return RolloutResult{Output: o, Scored: scored, Score: score}, nil
}
