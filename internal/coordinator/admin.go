package coordinator

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/rath-run/rath/internal/check"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// TenantRetention gives each tenant its graph store and a lineage.Retention
// over connections confined to its rows (*auth.TenantPools on Postgres:
// row-level security, migrations 00011 and 00019). When Config.Tenants does
// not provide it, tenants' requests get no gc, pins, redaction or check:
// never the unconfined Config.Retention.
type TenantRetention interface {
	Retention(ctx context.Context, tenant string) (store.Store, lineage.Retention, error)
}

// errNoRetention: this coordinator serves no retention to the request.
var errNoRetention = errors.New("this coordinator serves no gc, pins, redaction or check (no retention database)")

// adminRoutes registers gc, pins, redaction and check (docs/api.md,
// "Admin"). Scopes (RouteScopes): reading pins and the redaction records
// is read (a read token of the tenant reads its transcripts anyway);
// pinning and unpinning are admin (a pin keeps data from gc, so it is a
// retention decision); gc, redact and check are admin. Every one acts on
// the caller's tenant's rows only.
func (c *Coordinator) adminRoutes(api *apiMux) {
	api.HandleFunc("POST /v1/admin/gc", c.gc)
	api.HandleFunc("GET /v1/pins", c.listPins)
	api.HandleFunc("POST /v1/versions/{id}/pin", c.pin)
	api.HandleFunc("DELETE /v1/versions/{id}/pin", c.unpin)
	api.HandleFunc("POST /v1/versions/{id}/redact", c.redact)
	api.HandleFunc("GET /v1/redactions", c.listRedactions)
	api.HandleFunc("POST /v1/admin/check", c.check)
}

// retentionOf returns the graph store and retention ctx is bound to: its
// tenant's confined ones when the request is bound to a tenant's pools,
// else (authentication off, the embedded store's default tenant) the
// coordinator's own store and Config.Retention.
func (c *Coordinator) retentionOf(ctx context.Context) (store.Store, lineage.Retention, error) {
	if sc := c.scopeOf(ctx); sc.pooled {
		tr, has := c.cfg.Tenants.(TenantRetention)
		if !has {
			return nil, lineage.Retention{}, errNoRetention
		}
		return tr.Retention(ctx, sc.Tenant)
	}
	if c.cfg.Retention == nil {
		return nil, lineage.Retention{}, errNoRetention
	}
	return c.sysGraph, *c.cfg.Retention, nil
}

// failAdmin answers a retention error: no retention 501, an already
// redacted chunk or a missing pin 409/404, a row-level security refusal
// (another tenant's version) 404, else as fail.
func (c *Coordinator) failAdmin(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errNoRetention):
		writeError(w, http.StatusNotImplemented, "not_implemented", err.Error())
	case errors.Is(err, lineage.ErrAlreadyRedacted):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, lineage.ErrNotPinned):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case strings.Contains(err.Error(), "row-level security"):
		// A pin of a version the tenant cannot see: the policy's check
		// refuses it. Say what a version of no tenant would say.
		writeError(w, http.StatusNotFound, "not_found", "no such version")
	default:
		c.fail(w, r, err)
	}
}

// gc serves POST /v1/admin/gc.
func (c *Coordinator) gc(w http.ResponseWriter, r *http.Request) {
	var req api.GCRequest
	if !c.decode(w, r, &req) {
		return
	}
	keep, err := time.ParseDuration(req.Keep)
	if err != nil || keep <= 0 {
		c.fail(w, r, badRequest("keep: %q is not a positive duration, such as 720h", req.Keep))
		return
	}
	_, ret, err := c.retentionOf(r.Context())
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	rep, err := ret.GC(r.Context(), time.Now().Add(-keep), req.DryRun)
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// listPins serves GET /v1/pins.
func (c *Coordinator) listPins(w http.ResponseWriter, r *http.Request) {
	_, ret, err := c.retentionOf(r.Context())
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	ps, err := ret.Pins(r.Context())
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PinList{Pins: nonNil(ps)})
}

// retentionVersion resolves the caller's retention and the version the
// path names (the caller's tenant's), or writes the error and reports false.
func (c *Coordinator) retentionVersion(w http.ResponseWriter, r *http.Request) (lineage.Retention, *session.Version, bool) {
	g, ret, err := c.retentionOf(r.Context())
	if err != nil {
		c.failAdmin(w, r, err)
		return lineage.Retention{}, nil, false
	}
	v, err := c.ownVersion(r, g)
	if err != nil {
		c.failAdmin(w, r, err)
		return lineage.Retention{}, nil, false
	}
	return ret, v, true
}

// ownVersion parses {id} and checks the caller's tenant can see it (404
// otherwise, as for a version that does not exist).
func (c *Coordinator) ownVersion(r *http.Request, g store.Store) (*session.Version, error) {
	id, err := session.ParseID(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	v, err := g.Get(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// pin serves POST /v1/versions/{id}/pin (body optional: {note}).
func (c *Coordinator) pin(w http.ResponseWriter, r *http.Request) {
	var req api.PinRequest
	if r.ContentLength != 0 && !c.decode(w, r, &req) {
		return
	}
	ret, v, ok := c.retentionVersion(w, r)
	if !ok {
		return
	}
	if err := ret.Pin(r.Context(), v.ID, req.Note); err != nil {
		c.failAdmin(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PinReply{ID: v.ID, Pinned: true, Note: req.Note})
}

// unpin serves DELETE /v1/versions/{id}/pin.
func (c *Coordinator) unpin(w http.ResponseWriter, r *http.Request) {
	ret, v, ok := c.retentionVersion(w, r)
	if !ok {
		return
	}
	if err := ret.Unpin(r.Context(), v.ID); err != nil {
		c.failAdmin(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PinReply{ID: v.ID, Pinned: false})
}

// redact serves POST /v1/versions/{id}/redact. It takes effect in every
// process on the database as soon as it returns: rath_redact bumps the
// redaction epoch (migration 00018) in its transaction, and every store
// checks the epoch before serving from its cache.
func (c *Coordinator) redact(w http.ResponseWriter, r *http.Request) {
	var req api.RedactRequest
	if !c.decode(w, r, &req) {
		return
	}
	if req.Chunk < 0 {
		c.fail(w, r, badRequest("chunk: %d: the chunk's ord in the transcript, from 0", req.Chunk))
		return
	}
	if strings.TrimSpace(req.Reason) == "" {
		c.fail(w, r, badRequest("reason: required: it is recorded with the redaction"))
		return
	}
	ret, v, ok := c.retentionVersion(w, r)
	if !ok {
		return
	}
	if req.Chunk >= v.Len {
		c.fail(w, r, badRequest("chunk: %d: version %s's transcript has %d chunks (0 to %d)", req.Chunk, v.ID, v.Len, v.Len-1))
		return
	}
	done, err := ret.Redact(r.Context(), v.ID, req.Chunk, req.Reason)
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RedactReply{Redactions: nonNil(done)})
}

// listRedactions serves GET /v1/redactions.
func (c *Coordinator) listRedactions(w http.ResponseWriter, r *http.Request) {
	_, ret, err := c.retentionOf(r.Context())
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	rs, err := ret.Redactions(r.Context())
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	ps, err := ret.CheckRedactions(r.Context())
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RedactionList{Redactions: nonNil(rs), Problems: nonNil(ps)})
}

// check serves POST /v1/admin/check: the invariant checker
// (internal/check) over the caller's tenant's rows. A tenant's admin sees
// only its own tenant's findings (its connections are confined by
// row-level security); there is no cross-tenant (global) admin token.
func (c *Coordinator) check(w http.ResponseWriter, r *http.Request) {
	var req api.CheckRequest
	if r.ContentLength != 0 && !c.decode(w, r, &req) {
		return
	}
	g, ret, err := c.retentionOf(r.Context())
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	d := check.Postgres
	if ret.Dialect == lineage.SQLite {
		d = check.SQLite
	}
	rep, err := check.Check(r.Context(), g, ret.DB, d, check.Options{Settled: req.Settled})
	if err != nil {
		c.failAdmin(w, r, err)
		return
	}
	out := api.CheckReport{Versions: rep.Versions, Chunks: rep.Chunks, Edges: rep.Edges, Runs: rep.Runs, Steps: rep.Steps, Open: rep.Open,
		Problems: make([]api.CheckProblem, 0, len(rep.Problems))}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, api.CheckProblem{Invariant: p.Invariant, Row: p.Row, Detail: p.Detail})
	}
	writeJSON(w, http.StatusOK, out)
}
