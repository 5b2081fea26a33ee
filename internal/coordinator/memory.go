package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/session"
)

// TenantMemory gives each tenant a memory store confined to the
// namespaces it owns (*auth.TenantPools on Postgres: row-level security,
// migration 00015). When Config.Tenants does not provide it, authenticated
// requests get no memory at all: never the unconfined Config.Memory.
type TenantMemory interface {
	Memory(ctx context.Context, tenant string) (memory.Store, error)
}

// errNoMemory: this coordinator serves no memory store to the request.
var errNoMemory = errors.New("this coordinator serves no memory store")

// memoryRoutes registers the memory endpoints (docs/api.md, "Memory").
func (c *Coordinator) memoryRoutes(api *apiMux) {
	api.HandleFunc("GET /v1/memory/items", c.listMemory)
	api.HandleFunc("GET /v1/memory/item", c.readMemory)
	api.HandleFunc("POST /v1/memory/items", c.rememberMemory)
	api.HandleFunc("POST /v1/memory/recall", c.recallMemory)
	api.HandleFunc("DELETE /v1/memory/item", c.deleteMemory)
	api.HandleFunc("POST /v1/memory/commit", c.commitMemory)
}

// memoryOf returns the memory store ctx is bound to: its tenant's confined
// store when the request is bound to a tenant's pools, else (system work,
// authentication off, or the embedded store's default tenant)
// Config.Memory.
func (c *Coordinator) memoryOf(ctx context.Context) (memory.Store, error) {
	if sc := c.scopeOf(ctx); sc.pooled {
		tm, has := c.cfg.Tenants.(TenantMemory)
		if !has {
			return nil, errNoMemory
		}
		return tm.Memory(ctx, sc.Tenant)
	}
	if c.cfg.Memory == nil {
		return nil, errNoMemory
	}
	return c.cfg.Memory, nil
}

// failMemory answers a memory error: not_found 404, bad input 400, too
// large 413, a namespace another tenant owns (row-level security refused
// the write, SQLSTATE 42501) 403, no memory store 404.
func (c *Coordinator) failMemory(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errNoMemory):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case memory.IsKind(err, memory.KindNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case memory.IsKind(err, memory.KindInvalidURI), memory.IsKind(err, memory.KindInvalidArgument):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case memory.IsKind(err, memory.KindTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", err.Error())
	case strings.Contains(err.Error(), "SQLSTATE 42501"):
		writeError(w, http.StatusForbidden, "forbidden", "this namespace belongs to another tenant")
	default:
		c.fail(w, r, err)
	}
}

// listMemory serves GET /v1/memory/items?namespace=&scope=&limit=&deleted=true.
func (c *Coordinator) listMemory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ms, err := c.memoryOf(r.Context())
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	items, err := ms.List(r.Context(), q.Get("namespace"), memory.ListOptions{Scope: q.Get("scope"), Limit: limit, IncludeDeleted: q.Get("deleted") == "true"})
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.MemoryList{Items: nonNil(items)})
}

// readMemory serves GET /v1/memory/item?namespace=&uri=.
func (c *Coordinator) readMemory(w http.ResponseWriter, r *http.Request) {
	ms, err := c.memoryOf(r.Context())
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	q := r.URL.Query()
	it, err := ms.Read(r.Context(), q.Get("namespace"), q.Get("uri"))
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// rememberMemory serves POST /v1/memory/items: write (or rewrite) an item.
func (c *Coordinator) rememberMemory(w http.ResponseWriter, r *http.Request) {
	var req api.RememberRequest
	if !c.decode(w, r, &req) {
		return
	}
	if err := c.ownWriter(r.Context(), req.VersionID); err != nil {
		c.failMemory(w, r, err)
		return
	}
	ms, err := c.memoryOf(r.Context())
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	it, err := ms.Remember(r.Context(), req.Namespace, memory.Write{URI: req.URI, Text: req.Text, Metadata: req.Metadata, VersionID: req.VersionID})
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, it)
}

// recallMemory serves POST /v1/memory/recall: BM25 recall in a namespace.
func (c *Coordinator) recallMemory(w http.ResponseWriter, r *http.Request) {
	var req api.RecallRequest
	if !c.decode(w, r, &req) {
		return
	}
	ms, err := c.memoryOf(r.Context())
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	hits, err := ms.Recall(r.Context(), req.Namespace, memory.Query{Text: req.Text, TopK: req.TopK, Scope: req.Scope})
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RecallReply{Hits: nonNil(hits)})
}

// ownWriter checks that a version a memory write names as its writer (or
// deleter) is one the caller's tenant can see: provenance cannot name
// another tenant's version. "" (written outside a step) passes.
func (c *Coordinator) ownWriter(ctx context.Context, version string) error {
	if version == "" {
		return nil
	}
	id, err := session.ParseID(version)
	if err != nil {
		return &memory.Error{Kind: memory.KindInvalidArgument, Message: fmt.Sprintf("version_id %q: %v", version, err)}
	}
	if _, err := c.graph.Get(ctx, id); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return &memory.Error{Kind: memory.KindNotFound, Message: fmt.Sprintf("version_id %s: no such version", id)}
		}
		return err
	}
	return nil
}

// deleteMemory serves DELETE /v1/memory/item?namespace=&uri=&version=: the
// item is deleted, a tombstone stays (GET /v1/memory/items?deleted=true).
func (c *Coordinator) deleteMemory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := c.ownWriter(r.Context(), q.Get("version")); err != nil {
		c.failMemory(w, r, err)
		return
	}
	ms, err := c.memoryOf(r.Context())
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	ns, err := memory.CheckNamespace(q.Get("namespace"))
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	if err := ms.Delete(r.Context(), ns, q.Get("uri"), q.Get("version")); err != nil {
		c.failMemory(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.MemoryDeleteReply{Namespace: ns, Deleted: q.Get("uri")})
}

// commitMemory serves POST /v1/memory/commit: archive a session version's
// transcript into memory (memory://session/ID/transcript, written by that
// version), as an agent's commit: true does. The version must be the
// caller's tenant's.
func (c *Coordinator) commitMemory(w http.ResponseWriter, r *http.Request) {
	var req api.MemoryCommitRequest
	if !c.decode(w, r, &req) {
		return
	}
	id, err := session.ParseID(req.Version)
	if err != nil {
		c.fail(w, r, badRequest("version: %q: %v", req.Version, err))
		return
	}
	ms, err := c.memoryOf(r.Context())
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	out, err := session.Open(r.Context(), c.graph, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	it, err := agent.CommitTranscript(r.Context(), ms, req.Namespace, out, req.Agent)
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.MemoryCommitReply{Transcript: it})
}
