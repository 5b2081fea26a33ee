package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// Workflow runs: a run whose steps a driver adds by key (PUT
// /v1/runs/{id}/steps/{key}) and which the driver ends (…/complete,
// …/fail). The driver is a program using the SDK's cluster runtime
// (driver "client"), or this coordinator for a declarative workflow file
// (driver "coordinator", see driver.go).

// MaxStepWait bounds the ?wait= of GET /v1/runs/{id}/steps/{key}.
const MaxStepWait = 60 * time.Second

// workflowRoutes registers the workflow endpoints on the API mux.
func (c *Coordinator) workflowRoutes(api *apiMux) {
	api.HandleFunc("PUT /v1/runs/{id}/steps/{key}", c.putStepHTTP)
	api.HandleFunc("GET /v1/runs/{id}/steps/{key}", c.getStepHTTP)
	api.HandleFunc("POST /v1/runs/{id}/complete", c.completeRunHTTP)
	api.HandleFunc("POST /v1/runs/{id}/fail", c.failRunHTTP)
	api.HandleFunc("POST /v1/runs/{id}/accept-changes", c.acceptChangesHTTP)
	api.HandleFunc("POST /v1/versions", c.putVersionHTTP)
	api.HandleFunc("GET /v1/versions/{id}", c.getVersionHTTP)
	api.HandleFunc("GET /v1/versions/{id}/common-base", c.commonBaseHTTP)
}

// MaxTimeout bounds a run's timeout.
const MaxTimeout = 366 * 24 * time.Hour

// parseTimeout turns a request's timeout into a deadline from now.
func parseTimeout(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return nil, badRequest("timeout: %q is not a positive duration (e.g. \"90s\", \"10m\")", s)
	}
	if d > MaxTimeout {
		return nil, badRequest("timeout: %s exceeds the limit %s", d, MaxTimeout)
	}
	t := time.Now().Add(d).UTC()
	return &t, nil
}

// readsFor returns the store to read rs's rows from: Config.RunReads for
// the coordinator's own run store, rs itself otherwise (a tenant's).
func (c *Coordinator) readsFor(rs *runs.Store) *runs.Store {
	if rs == c.runs && c.cfg.RunReads != nil {
		return c.cfg.RunReads
	}
	return rs
}

// runWithSteps reads a run, with its steps only when its budget needs them
// (what they spent): a fan-out's steps are many.
func runWithSteps(ctx context.Context, rs *runs.Store, runID string) (runs.Run, error) {
	r, err := rs.Head(ctx, runID)
	if err != nil || r.Budget.IsZero() {
		return r, err
	}
	return rs.Get(ctx, runID)
}

// exhausted names the limit a budget has reached, or "".
func exhausted(b bus.Budget) string {
	switch {
	case b.MaxTokens > 0 && b.UsedTokens >= b.MaxTokens:
		return fmt.Sprintf("budget: max_tokens %d reached (used %d)", b.MaxTokens, b.UsedTokens)
	case b.MaxCostUSD > 0 && b.UsedCostUSD >= b.MaxCostUSD:
		return fmt.Sprintf("budget: max_cost_usd %g reached (used %g)", b.MaxCostUSD, b.UsedCostUSD)
	}
	return ""
}

// spentWith returns the run's budget with what its committed steps other
// than st used, read from g: each step's tokens are its output's usage
// less its input's, its cost the "loop.cost_usd" its version records.
func spentWith(ctx context.Context, g interface {
	Get(context.Context, session.ID) (*session.Version, error)
}, r runs.Run, st runs.Step) (bus.Budget, error) {
	b := bus.Budget{MaxTokens: r.Budget.MaxTokens, MaxCostUSD: r.Budget.MaxCostUSD}
	for _, other := range r.Steps {
		if other.ID == st.ID || other.Status != runs.StepCommitted || other.Output == nil {
			continue
		}
		out, err := g.Get(ctx, *other.Output)
		if err != nil {
			return b, fmt.Errorf("budget: step %s output: %w", other.ID, err)
		}
		in, err := g.Get(ctx, other.Input)
		if err != nil {
			return b, fmt.Errorf("budget: step %s input: %w", other.ID, err)
		}
		b.UsedTokens += out.Usage.Sub(in.Usage).TotalTokens
		for _, e := range out.Extras {
			var cost float64
			if e.Key == "loop.cost_usd" && json.Unmarshal(e.Value, &cost) == nil {
				b.UsedCostUSD += cost
			}
		}
	}
	return b, nil
}

func (c *Coordinator) putStepHTTP(w http.ResponseWriter, r *http.Request) {
	wait, ok := c.parseStepWait(w, r)
	if !ok {
		return
	}
	var req api.StepRequest
	if !c.decode(w, r, &req) {
		return
	}
	if len(req.Call) == 0 {
		c.fail(w, r, badRequest("call: required"))
		return
	}
	in, err := session.ParseID(req.Input)
	if err != nil {
		c.fail(w, r, badRequest("input: %v", err))
		return
	}
	st, err := c.runSvc.PutStepWait(r.Context(), c.scopeOf(r.Context()), r.PathValue("id"), r.PathValue("key"), req.Call, in, wait)
	if err != nil {
		c.failWorkflow(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st.API())
}

// parseStepWait parses the ?wait= of a step request (0 when absent); on a bad
// value it writes the error and returns false.
func (c *Coordinator) parseStepWait(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	s := r.URL.Query().Get("wait")
	if s == "" {
		return 0, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxStepWait {
		c.fail(w, r, badRequest("wait: %q: want a duration in 0..%s", s, MaxStepWait))
		return 0, false
	}
	holdConn(w, d+holdSlack) // the long poll outlasts the server's timeouts
	return d, true
}

func (c *Coordinator) getStepHTTP(w http.ResponseWriter, r *http.Request) {
	wait, ok := c.parseStepWait(w, r)
	if !ok {
		return
	}
	key := r.PathValue("key")
	if err := runs.ValidKey(key); err != nil {
		c.fail(w, r, fmt.Errorf("%w: key: %w", ErrBadRequest, err))
		return
	}
	st, err := c.runSvc.WaitStep(r.Context(), c.scopeOf(r.Context()), r.PathValue("id"), key, wait)
	if err != nil {
		c.failWorkflow(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st.API())
}

func (c *Coordinator) completeRunHTTP(w http.ResponseWriter, r *http.Request) {
	var req api.OutcomeRequest
	if !c.decode(w, r, &req) {
		return
	}
	if req.Error != "" {
		c.fail(w, r, badRequest("error: not allowed here (POST …/fail)"))
		return
	}
	out, err := session.ParseID(req.Output)
	if err != nil {
		c.fail(w, r, badRequest("output: %v", err))
		return
	}
	run, err := c.runSvc.Complete(r.Context(), c.scopeOf(r.Context()), r.PathValue("id"), out)
	if err != nil {
		c.failWorkflow(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run.API())
}

func (c *Coordinator) failRunHTTP(w http.ResponseWriter, r *http.Request) {
	var req api.OutcomeRequest
	if !c.decode(w, r, &req) {
		return
	}
	if req.Output != "" {
		c.fail(w, r, badRequest("output: not allowed here (POST …/complete)"))
		return
	}
	if strings.TrimSpace(req.Error) == "" {
		c.fail(w, r, badRequest("error: required"))
		return
	}
	run, err := c.runSvc.Fail(r.Context(), c.scopeOf(r.Context()), r.PathValue("id"), req.Error)
	if err != nil {
		c.failWorkflow(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run.API())
}

// acceptChangesHTTP records that the caller accepts steps whose input
// changed (POST /v1/runs/{id}/accept-changes, no body), reopening a run
// that failed for it.
func (c *Coordinator) acceptChangesHTTP(w http.ResponseWriter, r *http.Request) {
	run, reopened, err := c.runSvc.AcceptChanges(r.Context(), c.scopeOf(r.Context()), r.PathValue("id"))
	if err != nil {
		c.failWorkflow(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.AcceptChangesReply{Run: run.API(), Reopened: reopened})
}

// failWorkflow is fail with the workflow errors mapped too.
func (c *Coordinator) failWorkflow(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, runs.ErrNotWorkflow) {
		writeError(w, http.StatusConflict, "conflict", err.Error())
		return
	}
	c.fail(w, r, err)
}

// putVersionHTTP commits a sealed version (a driver's fork or merge, made
// with package session against the API's graph). The store verifies its
// links and hash, as for any put.
func (c *Coordinator) putVersionHTTP(w http.ResponseWriter, r *http.Request) {
	var v session.Version
	r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxImportBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body exceeds %d bytes", c.cfg.MaxImportBytes))
			return
		}
		c.fail(w, r, badRequest("request body: %v", err))
		return
	}
	if err := clientKey("key", &v); err != nil {
		c.fail(w, r, err)
		return
	}
	if placed(v.Placement) {
		if err := c.validatePlacement(v.Placement); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	out, err := c.graph.Put(r.Context(), &v)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func (c *Coordinator) getVersionHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := session.ParseID(r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v, err := c.graph.Get(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (c *Coordinator) commonBaseHTTP(w http.ResponseWriter, r *http.Request) {
	a, err := session.ParseID(r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	b, err := session.ParseID(r.URL.Query().Get("with"))
	if err != nil {
		c.fail(w, r, badRequest("with: %v", err))
		return
	}
	base, ok, err := c.graph.CommonBase(r.Context(), a, b)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var out api.CommonBase
	if ok {
		out.Base = &base
	}
	writeJSON(w, http.StatusOK, out)
}

// stepWaiters wakes the callers of WaitStep when an event about their step
// or its run arrives. One subscription to every run's step and run ends
// feeds it (EventFeed, when the bus can subscribe); a caller polls as
// well, since events may be lost.
type stepWaiters struct {
	// fed: the event feed is live, so waiters may poll slowly.
	fed atomic.Bool

	mu     sync.Mutex
	byStep map[string]map[chan struct{}]struct{}
	byRun  map[string]map[chan struct{}]struct{}
	// left is when the last waiter left. The feed subscribes only while
	// there are waiters (or were, lately: wanted), and demand tells it
	// at once that a first one came.
	left   time.Time
	demand chan struct{}
}

// demanded returns the channel that receives when a first waiter comes.
func (sw *stepWaiters) demanded() <-chan struct{} {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.demandLocked()
}

// demandLocked is demanded with sw.mu held.
func (sw *stepWaiters) demandLocked() chan struct{} {
	if sw.demand == nil {
		sw.demand = make(chan struct{}, 1)
	}
	return sw.demand
}

// wanted reports whether the feed should be subscribed at now: someone
// waits (every waiter waits on its run), or did within linger.
func (sw *stepWaiters) wanted(now time.Time, linger time.Duration) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return len(sw.byRun) > 0 || (!sw.left.IsZero() && now.Sub(sw.left) < linger)
}

func (sw *stepWaiters) wait(runID, stepID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	sw.mu.Lock()
	if sw.byStep == nil {
		sw.byStep, sw.byRun = map[string]map[chan struct{}]struct{}{}, map[string]map[chan struct{}]struct{}{}
	}
	if len(sw.byRun) == 0 {
		select {
		case sw.demandLocked() <- struct{}{}:
		default:
		}
	}
	add := func(m map[string]map[chan struct{}]struct{}, k string) {
		if m[k] == nil {
			m[k] = map[chan struct{}]struct{}{}
		}
		m[k][ch] = struct{}{}
	}
	add(sw.byStep, stepID)
	add(sw.byRun, runID)
	sw.mu.Unlock()
	return ch, func() {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		del := func(m map[string]map[chan struct{}]struct{}, k string) {
			delete(m[k], ch)
			if len(m[k]) == 0 {
				delete(m, k)
			}
		}
		del(sw.byStep, stepID)
		del(sw.byRun, runID)
		if len(sw.byRun) == 0 {
			sw.left = time.Now()
		}
	}
}

// notifyLive is notify for an event as the feed's subscription hands it
// over: an event of a run nobody waits on is dropped undecoded (a step's
// waiter waits on its run too).
func (sw *stepWaiters) notifyLive(le bus.LiveEvent) {
	sw.mu.Lock()
	waited := len(sw.byRun[le.RunID]) > 0
	sw.mu.Unlock()
	if !waited {
		return
	}
	e, err := le.Decode()
	if err != nil {
		// Undecodable (no step id to go by): the run's waiters read
		// their steps again.
		sw.mu.Lock()
		defer sw.mu.Unlock()
		wake(sw.byRun[le.RunID])
		return
	}
	sw.notify(e)
}

// wakeAll wakes every waiter: each reads its step again.
func (sw *stepWaiters) wakeAll() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, set := range sw.byRun {
		wake(set)
	}
}

// wake wakes the waiters of set without blocking (a waiter already woken
// has its wake-up pending).
func wake(set map[chan struct{}]struct{}) {
	for ch := range set {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (sw *stepWaiters) notify(e bus.Event) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	var set map[chan struct{}]struct{}
	switch {
	case e.StepID != "" && (e.Type == "step.committed" || e.Type == "step.failed"):
		set = sw.byStep[e.StepID]
	case strings.HasPrefix(e.Type, "run.") && e.Type != "run.submitted":
		set = sw.byRun[e.RunID]
	}
	wake(set)
}

// clientKey checks the key of a version a client commits (field names it
// in the error). Keys are the system's: a step's output is committed under
// its step id, and a keyed put answers with the version holding the key,
// so a client choosing keys could squat a step's. A client may give only
// the key a fan-in merge derives from its own two parents
// ([flow.MergeKey]): it names no step, and only a merge of exactly those
// versions, which the caller's tenant must see, can hold it.
func clientKey(field string, v *session.Version) error {
	if v.Key == "" {
		return nil
	}
	if v.Op == session.OpMerge && len(v.Parents) == 2 && v.Key == flow.MergeKey(v.Parents[0], v.Parents[1]) {
		return nil
	}
	// An invalid version (session.ErrInvalidVersion) to a client.Graph,
	// whose callers see the session.Graph contract's errors.
	return fmt.Errorf("%w: %w: %s: a client may not choose a version's key (keys are the system's); the only key accepted is a fan-in merge's own, merge/<first parent>+<second parent>",
		ErrBadRequest, session.ErrInvalidVersion, field)
}

// keylessImport is the graph an import writes through: it refuses a
// version carrying a key (clientKey), naming the version's record.
type keylessImport struct {
	session.Graph
	n int
}

// Put implements [session.Graph].
func (g *keylessImport) Put(ctx context.Context, v *session.Version) (*session.Version, error) {
	g.n++
	if v != nil {
		if err := clientKey(fmt.Sprintf("versions[%d].key", g.n-1), v); err != nil {
			return nil, err
		}
	}
	return g.Graph.Put(ctx, v)
}

// Bulk implements [session.BulkGraph]: an import writes in one transaction
// of the underlying graph, through a transaction that refuses client keys
// the way Put does.
func (g *keylessImport) Bulk(ctx context.Context, fn func(ctx context.Context, tx session.BulkTx) error) error {
	bg, ok := g.Graph.(session.BulkGraph)
	if !ok {
		return errors.New("coordinator: the graph cannot import in one transaction")
	}
	return bg.Bulk(ctx, func(ctx context.Context, tx session.BulkTx) error {
		return fn(ctx, keylessTx{BulkTx: tx, g: g})
	})
}

// keylessTx is [keylessImport]'s transaction.
type keylessTx struct {
	session.BulkTx
	g *keylessImport
}

// PutBatch implements [session.BulkTx].
func (tx keylessTx) PutBatch(ctx context.Context, vs []*session.Version) error {
	for _, v := range vs {
		tx.g.n++
		if v != nil {
			if err := clientKey(fmt.Sprintf("versions[%d].key", tx.g.n-1), v); err != nil {
				return err
			}
		}
	}
	return tx.BulkTx.PutBatch(ctx, vs)
}
