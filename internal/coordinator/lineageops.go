package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"

	"github.com/rath-run/rath/internal/replay"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/session"
)

// lineageOpsRoutes registers the lineage operations (docs/api.md,
// "Lineage"): verify, dossier and replay. Each works on the request's
// tenant's stores only: another tenant's version or run is not found.
func (c *Coordinator) lineageOpsRoutes(api *apiMux) {
	api.HandleFunc("GET /v1/sessions/{id}/verify", c.verifyVersion)
	api.HandleFunc("GET /v1/verify", c.verifyAll)
	api.HandleFunc("GET /v1/runs/{id}/dossier", c.runDossier)
	api.HandleFunc("POST /v1/versions/{id}/replay", c.replayVersion)
	api.HandleFunc("POST /v1/runs/{id}/replay", c.replayRun)
	api.HandleFunc("POST /v1/runs/{id}/rerun", c.rerunRun)
}

// uncachedGraph is the tenant's graph read past the store's cache, so
// verify checks the stored rows (lineage.Uncached).
type uncachedGraph struct{ tenantGraph }

func (g uncachedGraph) GetUncached(ctx context.Context, id session.ID) (*session.Version, error) {
	st := g.of(ctx)
	if u, ok := st.(lineage.Uncached); ok {
		return u.GetUncached(ctx, id)
	}
	return st.Get(ctx, id)
}

// verifyVersion serves GET /v1/sessions/{id}/verify: the hash chain of a
// version and everything it descends from.
func (c *Coordinator) verifyVersion(w http.ResponseWriter, r *http.Request) {
	id, err := session.ParseID(r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	lr, err := lineage.Verify(r.Context(), uncachedGraph{tenantGraph{c}}, id)
	if err != nil && !errors.Is(err, session.ErrHashMismatch) {
		c.fail(w, r, err)
		return
	}
	rep := api.VerifyReport{ID: id.String(), Versions: lr.Versions, Chunks: lr.Chunks}
	for _, p := range lr.Problems {
		rep.Problems = append(rep.Problems, p.String())
	}
	rep.Finish()
	writeJSON(w, http.StatusOK, rep)
}

// verifyAll serves GET /v1/verify: every version, chunk and edge of the
// request's tenant (its confined store).
func (c *Coordinator) verifyAll(w http.ResponseWriter, r *http.Request) {
	sr, err := c.graph.Verify(r.Context())
	if err != nil && !errors.Is(err, session.ErrHashMismatch) {
		c.fail(w, r, err)
		return
	}
	rep := api.VerifyReport{Versions: sr.Versions, Chunks: sr.Chunks, Edges: sr.Edges, Problems: sr.Problems}
	rep.Finish()
	writeJSON(w, http.StatusOK, rep)
}

// runDossier serves GET /v1/runs/{id}/dossier?format=json|md|html
// (&price=MODEL=PROMPT/COMPLETION, repeatable): a run's evidence, as JSON
// (the default) or the rendered document.
func (c *Coordinator) runDossier(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	format := q.Get("format")
	if format == "" {
		format = api.DossierJSON
	}
	if format != api.DossierJSON && format != api.DossierMarkdown && format != api.DossierHTML {
		c.fail(w, r, badRequest("format: want json, md or html, not %q", format))
		return
	}
	opts := lineage.DossierOptions{Prices: map[string]lineage.Price{}}
	for _, p := range q["price"] {
		model, price, err := lineage.ParsePrice(p)
		if err != nil {
			c.fail(w, r, badRequest("%v", err))
			return
		}
		opts.Prices[model] = price
	}
	run, err := c.runsOf(ctx).Get(ctx, r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	opts.Status, opts.Error = string(run.Status), run.Error
	// A model priced by --price keeps that price; the others cost what
	// the run's specs say (their pricing block).
	for model, price := range runs.SpecPrices(run.API()) {
		if _, ok := opts.Prices[model]; !ok {
			opts.Prices[model] = price
		}
	}
	info := runs.Lineage(run.API())
	g, err := lineage.ForRun(ctx, c.graph, info)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if opts.MemoryWritten, err = c.memoryWrites(ctx, run, g); err != nil {
		c.fail(w, r, err)
		return
	}
	if opts.Resumes, err = resumes(ctx, c.runsOf(ctx), run); err != nil {
		c.fail(w, r, err)
		return
	}
	d, err := lineage.BuildDossier(ctx, c.graph, info, opts)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if format == api.DossierJSON {
		writeJSON(w, http.StatusOK, d)
		return
	}
	var b bytes.Buffer
	ct := "text/markdown; charset=utf-8"
	if format == api.DossierHTML {
		ct = "text/html; charset=utf-8"
		err = d.WriteHTML(&b)
	} else {
		err = d.WriteMarkdown(&b)
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", ct)
	// The HTML is self-contained (inline CSS and SVG, no scripts): nothing
	// in it may load or run anything from the coordinator's origin.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// memoryWrites lists the memory items the versions of g wrote or deleted,
// in the memory namespaces the run's agents bind (run and step targets),
// from the request's tenant's memory store. No memory store: none.
func (c *Coordinator) memoryWrites(ctx context.Context, run runs.Run, g *lineage.Graph) ([]lineage.MemoryWrite, error) {
	if len(g.Nodes) == 0 {
		return nil, nil
	}
	ms, err := c.memoryOf(ctx)
	if errors.Is(err, errNoMemory) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	spaces := map[string]bool{}
	addSpace := func(target []byte) {
		if len(target) == 0 {
			return
		}
		call, err := flow.ParseTarget(target)
		if err != nil || call.Agent.Memory.Store == "" {
			return // not an agent with memory: nothing it could have written
		}
		ns, err := memory.CheckNamespace(call.Agent.Memory.Namespace)
		if err == nil {
			spaces[ns] = true
		}
	}
	addSpace(run.Target)
	for _, st := range run.Steps {
		addSpace(st.Target)
	}
	inGraph := make(map[string]bool, len(g.Nodes))
	for _, n := range g.Nodes {
		inGraph[n.ID.String()] = true
	}
	names := make([]string, 0, len(spaces))
	for ns := range spaces {
		names = append(names, ns)
	}
	sort.Strings(names)
	var items []memory.Item
	for _, ns := range names {
		list, err := ms.List(ctx, ns, memory.ListOptions{IncludeDeleted: true})
		if err != nil {
			return nil, err
		}
		for _, it := range list {
			if inGraph[it.VersionID] || inGraph[it.DeletedVersionID] {
				items = append(items, it)
			}
		}
	}
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].CreatedAt.Equal(items[j].CreatedAt) {
			return items[i].CreatedAt.Before(items[j].CreatedAt)
		}
		return items[i].URI < items[j].URI
	})
	out := make([]lineage.MemoryWrite, 0, len(items))
	for _, it := range items {
		m := lineage.MemoryWrite{Namespace: it.Namespace, URI: it.URI, Text: it.Text, Version: it.VersionID}
		if inGraph[it.DeletedVersionID] {
			m.Deleted, m.Version = true, it.DeletedVersionID
		}
		out = append(out, m)
	}
	return out, nil
}

// optionalBody decodes r's body into v when it has one: an absent or blank
// body leaves v as it is. It reports false after writing the error.
func (c *Coordinator) optionalBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength == 0 {
		return true
	}
	r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxBodyBytes)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		c.fail(w, r, badRequest("request body: %v", err))
		return false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return c.decode(w, r, v)
}

// replayRun serves POST /v1/runs/{id}/replay: it re-executes every step of
// a workflow run from its recording (no model called, no tool run) into a
// new replay branch, and reports per step whether the hashes came out
// identical (replay.Run). A divergence is not an error: the report says
// it (a strict replay stops at the first). The run and its versions are
// read from the request's tenant's stores only.
func (c *Coordinator) replayRun(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var req api.RunReplayRequest
	if !c.optionalBody(w, r, &req) {
		return
	}
	rec, err := replay.LoadRun(ctx, c.runsOf(ctx), r.PathValue("id"))
	if err != nil {
		if errors.Is(err, replay.ErrNotReplayable) {
			err = badRequest("%v", err)
		}
		c.fail(w, r, err)
		return
	}
	rep, err := replay.Run(ctx, c.graph, rec, replay.Options{Strict: req.Strict, Worker: "coordinator-replay"})
	switch {
	case errors.Is(err, replay.ErrDiverged):
	case errors.Is(err, replay.ErrNotReplayable):
		c.fail(w, r, badRequest("%v", err))
		return
	case err != nil:
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// replayVersion serves POST /v1/versions/{id}/replay: it re-executes the
// agent step that made the version with the recorded model replies and
// tool results (no model is called, no tool runs) and commits the result
// as an op replay version on the step's input, unless strict and it
// diverged. A divergence is not an error: the report says it.
func (c *Coordinator) replayVersion(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := session.ParseID(r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var req api.ReplayRequest
	if r.ContentLength != 0 {
		r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxBodyBytes)
		b, err := io.ReadAll(r.Body)
		if err != nil {
			c.fail(w, r, badRequest("request body: %v", err))
			return
		}
		if len(bytes.TrimSpace(b)) > 0 {
			r.Body = io.NopCloser(bytes.NewReader(b))
			if !c.decode(w, r, &req) {
				return
			}
		}
	}
	out, err := session.Open(ctx, c.graph, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := out.Version()
	if err := replay.Replayable(v); err != nil {
		c.fail(w, r, badRequest("%v", err))
		return
	}
	spec, err := replay.SpecOf(ctx, c.runsOf(ctx), v)
	if err != nil {
		if errors.Is(err, replay.ErrNotReplayable) {
			err = badRequest("%v", err)
		}
		c.fail(w, r, err)
		return
	}
	rep, err := replay.Step(ctx, c.graph, spec, out, nil, replay.Options{Strict: req.Strict, Worker: "coordinator-replay"})
	if err != nil && !errors.Is(err, replay.ErrDiverged) {
		c.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if rep.Replay != nil {
		status = http.StatusCreated
	}
	writeJSON(w, status, rep)
}

// resumes reads the journals of run's steps for their resumes.
func resumes(ctx context.Context, rs *runs.Store, run runs.Run) ([]lineage.Resume, error) {
	var out []lineage.Resume
	for _, st := range run.Steps {
		es, err := rs.LoadJournal(ctx, st.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.Kind != agent.JournalResume {
				continue
			}
			var d agent.ResumeInfo
			if json.Unmarshal(e.Data, &d) == nil {
				out = append(out, lineage.Resume{Step: st.ID, AfterRound: d.AfterRound, Worker: d.Worker, FromWorker: d.FromWorker})
			}
		}
	}
	return out, nil
}
