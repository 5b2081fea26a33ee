package coordinator

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Handler returns the HTTP API (docs/api.md). Health endpoints are
// /healthz (the process serves) and /readyz (the store answers).
func (c *Coordinator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", c.ready)

	api := newAPIMux() // routes need a scope in RouteScopes (auth.go)
	api.HandleFunc("POST /v1/runs", c.submit)
	api.HandleFunc("GET /v1/runs", c.listRuns)
	api.HandleFunc("GET /v1/runs/{id}", c.getRun)
	api.HandleFunc("POST /v1/runs/{id}/cancel", c.cancelRun)
	api.HandleFunc("GET /v1/runs/{id}/events", c.runEvents)
	c.workflowRoutes(api)
	c.approvalRoutes(api)
	c.reviewRoutes(api)

	api.HandleFunc("POST /v1/sessions", c.createSession)
	api.HandleFunc("GET /v1/sessions", c.listSessions)
	api.HandleFunc("GET /v1/sessions/{id}", c.getSession)
	api.HandleFunc("GET /v1/sessions/{id}/transcript", c.transcript)
	api.HandleFunc("GET /v1/sessions/{id}/ancestors", c.relatives(true))
	api.HandleFunc("GET /v1/sessions/{id}/descendants", c.relatives(false))
	api.HandleFunc("POST /v1/sessions/{id}/append", c.appendSession)
	api.HandleFunc("POST /v1/sessions/{id}/fork", c.forkSession)
	api.HandleFunc("POST /v1/sessions/{id}/detach", c.detachSession)
	api.HandleFunc("POST /v1/sessions/{id}/merge", c.mergeSession)
	api.HandleFunc("POST /v1/sessions/{id}/place", c.placeSession)
	api.HandleFunc("GET /v1/sessions/{id}/export", c.exportSession)
	api.HandleFunc("POST /v1/sessions/import", c.importSession)
	api.HandleFunc("POST /v1/export/trajectories", c.exportTrajectories)
	api.HandleFunc("POST /v1/export/pairs", c.exportPairs)
	api.HandleFunc("GET /v1/sessions/{id}/files", c.sessionFiles)
	api.HandleFunc("GET /v1/sessions/{id}/files/{path...}", c.sessionFile)
	api.HandleFunc("GET /v1/sessions/{id}/diff", c.sessionDiff)
	c.lineageRoutes(api)
	c.authRoutes(api)
	c.memoryRoutes(api)
	c.adminRoutes(api)
	mux.Handle("/v1/", uiCredentials(c.auth(api)))
	return c.instrument(mux)
}

// HealthHandler serves only /healthz, /readyz and (with Config.Gatherer)
// /metrics, for a listener of their own on the operator's network: API
// clients, slow or many, cannot crowd probes and scrapers out of it.
func (c *Coordinator) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", c.ready)
	if c.cfg.Gatherer != nil {
		mux.Handle("GET /metrics", telemetry.Handler(c.cfg.Gatherer))
	}
	return mux
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (c *Coordinator) ready(w http.ResponseWriter, r *http.Request) {
	if _, err := c.graph.List(r.Context(), store.ListParams{Limit: 1}); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "store: "+err.Error())
		return
	}
	if _, err := c.runs.List(r.Context(), runs.ListParams{Limit: 1}); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "run store: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (c *Coordinator) submit(w http.ResponseWriter, r *http.Request) {
	var req SubmitRequest
	if !c.decode(w, r, &req) {
		return
	}
	run, err := c.runSvc.Submit(r.Context(), c.scopeOf(r.Context()), req)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.cfg.Metrics.RunSubmitted()
	writeJSON(w, http.StatusCreated, run.API())
}

func (c *Coordinator) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	status, err := listStatus(q.Get("status"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	list, err := c.runsOf(r.Context()).List(r.Context(), runs.ListParams{Limit: limit, Before: q.Get("before"), Status: status})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RunList{Runs: runs.APIRuns(list)})
}

// listStatus checks the status filter of GET /v1/runs: a run state, or
// needs_review (the waiting runs a review decides; waiting lists the
// others).
func listStatus(s string) (runs.RunStatus, error) {
	if s == "" {
		return "", nil
	}
	all := append(runs.RunStatuses(), runs.RunNeedsReview)
	if slices.Contains(all, runs.RunStatus(s)) {
		return runs.RunStatus(s), nil
	}
	names := make([]string, len(all))
	for i, st := range all {
		names[i] = string(st)
	}
	return "", badRequest("status: %q is not a run status (one of %s)", s, strings.Join(names, ", "))
}

func (c *Coordinator) getRun(w http.ResponseWriter, r *http.Request) {
	rs := c.runsOf(r.Context())
	run, err := rs.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	out, err := withReviews(r.Context(), rs, run)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Coordinator) cancelRun(w http.ResponseWriter, r *http.Request) {
	run, err := c.runSvc.Cancel(r.Context(), c.scopeOf(r.Context()), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run.API())
}

// requestChunks returns the chunks a POST /v1/sessions or …/append body
// adds: system, user, assistant, then its chunks.
func requestChunks(b api.SessionRequest) ([]session.Chunk, error) {
	var cs []session.Chunk
	if b.System != "" {
		cs = append(cs, session.System(b.System))
	}
	if b.User != "" {
		cs = append(cs, session.User(b.User))
	}
	if b.Assistant != "" {
		cs = append(cs, session.Assistant(b.Assistant))
	}
	for i, c := range b.Chunks {
		if c.Kind() == session.KindApproval {
			// Only POST /v1/runs/{id}/approvals records decisions.
			return nil, badRequest("chunks[%d].kind: approval chunks are written only by POST /v1/runs/{id}/approvals", i)
		}
		if c.Kind() == session.KindReview {
			// Only a worker resuming a step a review decided (POST
			// /v1/runs/{id}/review) writes them.
			return nil, badRequest("chunks[%d].kind: review chunks are written only by a step resumed after POST /v1/runs/{id}/review", i)
		}
	}
	cs = append(cs, b.Chunks...)
	if len(cs) == 0 {
		return nil, badRequest("give user, system, assistant or chunks")
	}
	return cs, nil
}

// view is a version as the API returns it.
func view(s session.Session) api.Version {
	v := s.Version()
	return api.Version{Info: store.InfoOf(v), Chunks: nonNil(v.Chunks)}
}

func (c *Coordinator) createSession(w http.ResponseWriter, r *http.Request) {
	var req api.SessionRequest
	if !c.decode(w, r, &req) {
		return
	}
	cs, err := requestChunks(req)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	s, err := session.New(r.Context(), c.graph, cs...)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, view(s))
}

func (c *Coordinator) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	page, err := c.graph.List(r.Context(), store.ListParams{Limit: limit, After: q.Get("after"), RootsOnly: q.Get("roots") == "true", Run: q.Get("run")})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	page.Versions = nonNil(page.Versions)
	writeJSON(w, http.StatusOK, page) // an api.SessionList
}

func (c *Coordinator) open(w http.ResponseWriter, r *http.Request) (session.Session, bool) {
	id, err := session.ParseID(r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return session.Session{}, false
	}
	s, err := session.Open(r.Context(), c.graph, id)
	if err != nil {
		c.fail(w, r, err)
		return session.Session{}, false
	}
	return s, true
}

func (c *Coordinator) getSession(w http.ResponseWriter, r *http.Request) {
	if s, ok := c.open(w, r); ok {
		writeJSON(w, http.StatusOK, view(s))
	}
}

func (c *Coordinator) transcript(w http.ResponseWriter, r *http.Request) {
	s, ok := c.open(w, r)
	if !ok {
		return
	}
	cs, err := s.Chunks(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Transcript{ID: s.ID(), Chunks: nonNil(cs)})
}

func (c *Coordinator) relatives(up bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.open(w, r)
		if !ok {
			return
		}
		depth, err := intParam(r.URL.Query().Get("depth"), "depth")
		if err != nil {
			c.fail(w, r, err)
			return
		}
		var rel []store.Relative
		if up {
			rel, err = c.graph.Ancestors(r.Context(), s.ID(), depth)
		} else {
			rel, err = c.graph.Descendants(r.Context(), s.ID(), depth)
		}
		if err != nil {
			c.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, api.Relatives{ID: s.ID(), Versions: nonNil(rel)})
	}
}

func (c *Coordinator) appendSession(w http.ResponseWriter, r *http.Request) {
	s, ok := c.open(w, r)
	if !ok {
		return
	}
	var req api.SessionRequest
	if !c.decode(w, r, &req) {
		return
	}
	cs, err := requestChunks(req)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	out, err := s.Append(r.Context(), cs...)
	c.respond(w, r, out, err)
}

func (c *Coordinator) forkSession(w http.ResponseWriter, r *http.Request) {
	if s, ok := c.open(w, r); ok {
		out, err := s.Fork(r.Context())
		c.respond(w, r, out, err)
	}
}

func (c *Coordinator) detachSession(w http.ResponseWriter, r *http.Request) {
	if s, ok := c.open(w, r); ok {
		out, err := s.Detach(r.Context())
		c.respond(w, r, out, err)
	}
}

// placeSession commits a new version (op "place") whose tools run on the
// placement in the body ({"backend":"docker","spec":{"image":…}}), as
// [session.Session.To] does. The placement must pass the operator's
// sandbox policy; a snapshot is the worker's to record, never the client's.
func (c *Coordinator) placeSession(w http.ResponseWriter, r *http.Request) {
	s, ok := c.open(w, r)
	if !ok {
		return
	}
	var p api.PlaceRequest
	if !c.decode(w, r, &p) {
		return
	}
	if p.Backend == "" {
		c.fail(w, r, badRequest("backend: required (local or docker)"))
		return
	}
	if p.Snapshot != "" {
		c.fail(w, r, badRequest("snapshot: set by the worker, not by a client"))
		return
	}
	if p.Spec.HandleID != "" {
		c.fail(w, r, badRequest("spec.handle_id: set by the worker, not by a client"))
		return
	}
	if err := c.validatePlacement(p); err != nil {
		c.fail(w, r, err)
		return
	}
	out, err := s.To(r.Context(), p)
	c.respond(w, r, out, err)
}

func (c *Coordinator) mergeSession(w http.ResponseWriter, r *http.Request) {
	s, ok := c.open(w, r)
	if !ok {
		return
	}
	var req api.MergeRequest
	if !c.decode(w, r, &req) {
		return
	}
	id, err := session.ParseID(req.Other)
	if err != nil {
		c.fail(w, r, fmt.Errorf("%w: other: %w", ErrBadRequest, err))
		return
	}
	other, err := session.Open(r.Context(), c.graph, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	out, err := s.Merge(r.Context(), other)
	c.respond(w, r, out, err)
}

// exportSession streams a version and its ancestry as Rath session JSONL
// (docs/session-jsonl.md). The version is checked first, so an unknown id
// is a 404; an error after the stream started cuts it short (the JSONL is
// then incomplete, which its reader detects).
func (c *Coordinator) exportSession(w http.ResponseWriter, r *http.Request) {
	s, ok := c.open(w, r)
	if !ok {
		return
	}
	holdConn(w, transferWindow)
	w.Header().Set("Content-Type", "application/x-ndjson")
	if err := session.Export(r.Context(), c.graph, s.ID(), w); err != nil {
		c.log.WarnContext(r.Context(), "export cut short", slog.String("id", s.ID().String()), slog.Any("error", err))
	}
}

// importSession imports a session JSONL body of at most MaxImportBytes and
// returns the imported head version. The body is read whole (spooled to a
// temporary file) before the import's one transaction begins, so a client
// that stops or dies mid-upload stores nothing and holds no database
// connection (importbody.go).
//
// Under a sandbox policy every version's placement is checked before
// anything is imported, so a refused placement on any line imports
// nothing. Client keys are refused as the versions are written
// (keylessImport), inside the same transaction.
func (c *Coordinator) importSession(w http.ResponseWriter, r *http.Request) {
	holdConn(w, transferWindow)
	body, release, err := c.readImport(w, r)
	if err != nil {
		c.importFailed(w, r, err)
		return
	}
	defer release()
	if c.cfg.SandboxPolicy != nil {
		if err := c.validateImportPlacements(body); err != nil {
			c.fail(w, r, err)
			return
		}
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			c.fail(w, r, fmt.Errorf("rewind the import body: %w", err))
			return
		}
	}
	start := time.Now()
	s, err := session.Import(r.Context(), &keylessImport{Graph: c.graph}, body)
	if err != nil {
		c.importFailed(w, r, err)
		return
	}
	c.log.InfoContext(r.Context(), "session imported", slog.String("path", r.URL.Path), slog.String("head", s.ID().String()),
		slog.Int64("bytes", body.Size()), slog.Duration("took", time.Since(start)))
	writeJSON(w, http.StatusCreated, view(s)) // an api.ImportResult
}

// validateImportPlacements calls validatePlacement on the placement of
// every version record of a session JSONL body, a line at a time. Lines that
// do not decode are left to session.Import, which reports them.
func (c *Coordinator) validateImportPlacements(body io.Reader) error {
	rd := bufio.NewReader(body)
	for n := 1; ; n++ {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 {
			var rec struct {
				Record    string            `json:"record"`
				Placement session.Placement `json:"placement"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Record == "version" && placed(rec.Placement) {
				if err := c.validatePlacement(rec.Placement); err != nil {
					return fmt.Errorf("line %d: version: %w", n, err)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the import body: %w", err)
		}
	}
}

func (c *Coordinator) respond(w http.ResponseWriter, r *http.Request, s session.Session, err error) {
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, view(s))
}

// decode reads a JSON body strictly, within MaxBodyBytes.
func (c *Coordinator) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body exceeds %d bytes", c.cfg.MaxBodyBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, "bad_request", "request body: "+err.Error())
		return false
	}
	return true
}

// fail translates an error into an HTTP status and a JSON error body.
func (c *Coordinator) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := http.StatusInternalServerError, "internal"
	if st, cd, ok := workspaceStatus(err); ok {
		status, code = st, cd
	}
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, session.ErrInvalidID), errors.Is(err, session.ErrInvalidChunk),
		errors.Is(err, session.ErrInvalidVersion), errors.Is(err, session.ErrFormat), errors.Is(err, session.ErrHashMismatch):
		status, code = http.StatusBadRequest, "bad_request"
	case errors.Is(err, session.ErrNotFound), errors.Is(err, runs.ErrNotFound):
		status, code = http.StatusNotFound, "not_found"
	case errors.Is(err, flow.ErrNondeterministic):
		status, code = http.StatusConflict, api.CodeNondeterministic
	case errors.Is(err, session.ErrIncompatiblePlacement), errors.Is(err, session.ErrConflict), errors.Is(err, runs.ErrTerminal),
		errors.Is(err, runs.ErrNotWaiting), errors.Is(err, runs.ErrNoReview):
		status, code = http.StatusConflict, "conflict"
	case errors.Is(err, session.ErrTooLarge), errors.Is(err, bus.ErrTooLarge):
		status, code = http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, session.ErrUnavailable), errors.Is(err, bus.ErrUnavailable):
		status, code = http.StatusServiceUnavailable, "unavailable"
	}
	if status >= 500 {
		c.log.ErrorContext(r.Context(), "request failed", slog.String("path", r.URL.Path), slog.Any("error", err))
	}
	writeError(w, status, code, err.Error())
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func intParam(s, name string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, badRequest("%s: %q is not a non-negative integer", name, s)
	}
	return n, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
