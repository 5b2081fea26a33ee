package coordinator

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/memory"
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
}

// memoryOf returns the memory store ctx is bound to: its tenant's confined
// store when the request is bound to a tenant's pools, else (system work,
// authentication off, or the embedded store's default tenant)
// Config.Memory.
func (c *Coordinator) memoryOf(ctx context.Context) (memory.Store, error) {
	if _, bound := ctx.Value(tenantStoresKey{}).(boundStores); bound {
		p, ok := auth.PrincipalFrom(ctx)
		tm, has := c.cfg.Tenants.(TenantMemory)
		if !ok || !has {
			return nil, errNoMemory
		}
		return tm.Memory(ctx, p.Tenant)
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
	if items == nil {
		items = []memory.Item{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
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

type rememberRequest struct {
	Namespace string            `json:"namespace"`
	URI       string            `json:"uri"`
	Text      string            `json:"text"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// rememberMemory serves POST /v1/memory/items: write (or rewrite) an item.
func (c *Coordinator) rememberMemory(w http.ResponseWriter, r *http.Request) {
	var req rememberRequest
	if !c.decode(w, r, &req) {
		return
	}
	ms, err := c.memoryOf(r.Context())
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	it, err := ms.Remember(r.Context(), req.Namespace, memory.Write{URI: req.URI, Text: req.Text, Metadata: req.Metadata})
	if err != nil {
		c.failMemory(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, it)
}

type recallRequest struct {
	Namespace string `json:"namespace"`
	Text      string `json:"text"`
	TopK      int    `json:"top_k,omitempty"`
	Scope     string `json:"scope,omitempty"`
}

// recallMemory serves POST /v1/memory/recall: BM25 recall in a namespace.
func (c *Coordinator) recallMemory(w http.ResponseWriter, r *http.Request) {
	var req recallRequest
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
	if hits == nil {
		hits = []memory.Hit{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"hits": hits})
}
