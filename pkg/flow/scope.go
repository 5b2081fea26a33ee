package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/rath-run/rath/pkg/session"
)

// MaxKeyBytes bounds a step key. Keys longer than this (fan-outs nested
// very deeply) are shortened deterministically: their first bytes, then a
// hash of the whole key.
const MaxKeyBytes = 120

// ErrNoRuntime means a step was asked for with no [Runtime] in the context.
var ErrNoRuntime = errors.New("rath: no workflow runtime in context (use flow.Run or flow.WithRuntime)")

type runtimeKey struct{}

type scopeKey struct{}

// scope numbers the steps of one goroutine of a run: the root of the run,
// or one fan-out branch.
type scope struct {
	prefix string // "" for the root, "<key>.b<i>." for a branch

	mu   sync.Mutex // guards following
	n    int        // keys taken so far
	last string     // the last key taken ("" before the first)
}

// WithRuntime returns a context whose steps execute on rt. It opens a root
// key scope when ctx has none (see [Root]).
func WithRuntime(ctx context.Context, rt Runtime) context.Context {
	ctx = context.WithValue(ctx, runtimeKey{}, rt)
	if scopeOf(ctx) == nil {
		ctx = Root(ctx)
	}
	return ctx
}

// RuntimeFrom returns the runtime ctx carries.
func RuntimeFrom(ctx context.Context) (Runtime, bool) {
	rt, ok := ctx.Value(runtimeKey{}).(Runtime)
	return rt, ok && rt != nil
}

// Root returns a context with a fresh root key scope, whose first step is
// "1". [Run] opens one for every run, and [WithRuntime] when ctx has none.
// Never open one inside a running workflow: its keys would start again at
// "1" and collide with the run's.
func Root(ctx context.Context) context.Context {
	return context.WithValue(ctx, scopeKey{}, &scope{})
}

// Run forwards in through wf on rt as one run: it installs rt and a fresh
// root key scope in ctx and calls wf.Forward. Re-running the same workflow
// on a runtime that remembers its steps (see [Local]) executes nothing
// twice. Inside a workflow, call other workflows' Forward, not Run.
func Run(ctx context.Context, rt Runtime, wf Workflow, in session.Session) (session.Session, error) {
	if rt == nil {
		return session.Session{}, fmt.Errorf("flow: run: %w", ErrNoRuntime)
	}
	if wf == nil {
		return session.Session{}, errors.New("flow: run: workflow is nil")
	}
	return wf.Forward(Root(WithRuntime(ctx, rt)), in)
}

// scopeOf returns ctx's scope, or nil.
func scopeOf(ctx context.Context) *scope {
	sc, _ := ctx.Value(scopeKey{}).(*scope)
	return sc
}

// NextKey takes the next step key of ctx's scope: "1", "2", … in the root
// scope, "<k>.b<i>.1", "<k>.b<i>.2", … in branch i of the fan-out that took
// key k. Keys use only [A-Za-z0-9._-] and are at most [MaxKeyBytes] bytes.
//
// # Determinism
//
// A key names a step by its position in the run, so re-executing the run's
// code must take the same keys for the same steps: the order of steps in
// one scope must depend only on the run's input and on earlier steps'
// results (no clocks, no randomness, no map iteration order). Take keys
// only in the goroutine that owns the scope, and give every goroutine a
// fan-out starts its own scope with [Branch]. A context without a scope
// (neither [Run], [Root] nor [WithRuntime] made it) has no positions:
// NextKey returns "" and [Do] refuses the step.
func NextKey(ctx context.Context) string {
	sc := scopeOf(ctx)
	if sc == nil {
		return ""
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.n++
	sc.last = shortenKey(sc.prefix + strconv.Itoa(sc.n))
	return sc.last
}

// Branch returns the scope of branch i of a fan-out: a child of ctx whose
// steps are keyed "<k>.b<i>.<n>", where k is the key most recently taken
// in ctx's scope. A fan-out therefore takes one key for itself with
// [NextKey] and then opens each branch with Branch ([Branches] does both).
// Branch i must be opened for the same branch every time the run executes.
func Branch(ctx context.Context, i int) context.Context {
	parent := scopeOf(ctx)
	last := "0"
	if parent != nil {
		parent.mu.Lock()
		if parent.last != "" {
			last = parent.last
		}
		parent.mu.Unlock()
	}
	return context.WithValue(ctx, scopeKey{}, &scope{prefix: last + ".b" + strconv.Itoa(i) + "."})
}

// Branches takes one key of ctx's scope for a fan-out of n branches and
// returns the n branch scopes ([Branch] 0 … n-1).
func Branches(ctx context.Context, n int) []context.Context {
	NextKey(ctx)
	out := make([]context.Context, n)
	for i := range out {
		out[i] = Branch(ctx, i)
	}
	return out
}

// shortenKey keeps k when it fits MaxKeyBytes and otherwise replaces its
// tail with a hash of the whole key, so long keys stay unique and
// deterministic.
func shortenKey(k string) string {
	if len(k) <= MaxKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	h := hex.EncodeToString(sum[:16]) // 32 bytes
	return k[:MaxKeyBytes-len(h)-2] + "-h" + h
}

// Do executes call on in as the next step of ctx's scope: it takes a key
// with [NextKey] and calls the runtime ctx carries.
func Do(ctx context.Context, call Call, in session.Session) (session.Session, error) {
	rt, ok := RuntimeFrom(ctx)
	if !ok {
		return session.Session{}, fmt.Errorf("flow: %s step: %w", call.Kind, ErrNoRuntime)
	}
	if in.IsZero() {
		return session.Session{}, fmt.Errorf("flow: %s step: input session is zero", call.Kind)
	}
	key := NextKey(ctx)
	if key == "" {
		return session.Session{}, fmt.Errorf("flow: %s step: the context has no key scope (use flow.Run)", call.Kind)
	}
	out, err := rt.Step(ctx, key, call, in)
	if err != nil {
		return session.Session{}, fmt.Errorf("step %s (%s %s): %w", key, call.Kind, call.Agent.Name, err)
	}
	return out, nil
}
