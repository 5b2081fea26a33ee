package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/memory"
)

// Memory is the coordinator's memory (the caller's tenant's namespaces) as
// a [memory.Store]. Errors keep memory's kinds: a 404 is
// memory.KindNotFound (and matches ErrNotFound), a 400
// memory.KindInvalidArgument, a 413 memory.KindTooLarge.
type Memory struct {
	c *Client
}

var _ memory.Store = (*Memory)(nil)

// Memory returns the coordinator's memory.
func (c *Client) Memory() *Memory { return &Memory{c: c} }

// Remember writes (or rewrites) an item (POST /v1/memory/items, submit
// scope). w.VersionID, when set, must be a version of the caller's tenant.
func (m *Memory) Remember(ctx context.Context, namespace string, w memory.Write) (memory.Item, error) {
	var out api.MemoryItem
	err := m.c.Do(ctx, http.MethodPost, "/v1/memory/items",
		api.RememberRequest{Namespace: namespace, URI: w.URI, Text: w.Text, Metadata: w.Metadata, VersionID: w.VersionID}, &out)
	return out, memoryError(err)
}

// Read returns an item (GET /v1/memory/item, read scope).
func (m *Memory) Read(ctx context.Context, namespace, uri string) (memory.Item, error) {
	var out api.MemoryItem
	q := url.Values{"namespace": {namespace}, "uri": {uri}}
	err := m.c.Do(ctx, http.MethodGet, "/v1/memory/item?"+q.Encode(), nil, &out)
	return out, memoryError(err)
}

// List lists items in URI order (GET /v1/memory/items, read scope).
func (m *Memory) List(ctx context.Context, namespace string, opts memory.ListOptions) ([]memory.Item, error) {
	var out api.MemoryList
	q := url.Values{"namespace": {namespace}}
	if opts.Scope != "" {
		q.Set("scope", opts.Scope)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.IncludeDeleted {
		q.Set("deleted", "true")
	}
	err := m.c.Do(ctx, http.MethodGet, "/v1/memory/items?"+q.Encode(), nil, &out)
	return out.Items, memoryError(err)
}

// Delete deletes an item, leaving a tombstone recording versionID (DELETE
// /v1/memory/item, submit scope).
func (m *Memory) Delete(ctx context.Context, namespace, uri, versionID string) error {
	q := url.Values{"namespace": {namespace}, "uri": {uri}}
	if versionID != "" {
		q.Set("version", versionID)
	}
	return memoryError(m.c.Do(ctx, http.MethodDelete, "/v1/memory/item?"+q.Encode(), nil, nil))
}

// Recall ranks items by BM25 against q (POST /v1/memory/recall, read
// scope).
func (m *Memory) Recall(ctx context.Context, namespace string, q memory.Query) ([]memory.Hit, error) {
	var out api.RecallReply
	err := m.c.Do(ctx, http.MethodPost, "/v1/memory/recall", api.RecallRequest{Namespace: namespace, Text: q.Text, TopK: q.TopK, Scope: q.Scope}, &out)
	return out.Hits, memoryError(err)
}

// Commit archives a session version's transcript into memory
// (memory://session/ID/transcript, written by that version) on the
// coordinator (POST /v1/memory/commit, submit scope). agentName, when set,
// is recorded in the item's metadata.
func (m *Memory) Commit(ctx context.Context, namespace, version, agentName string) (api.MemoryCommitReply, error) {
	var out api.MemoryCommitReply
	err := m.c.Do(ctx, http.MethodPost, "/v1/memory/commit", api.MemoryCommitRequest{Namespace: namespace, Version: version, Agent: agentName}, &out)
	return out, memoryError(err)
}

// Close implements [memory.Store]; the client holds nothing to close.
func (m *Memory) Close() error { return nil }

// memoryError gives an API error memory's kind.
func memoryError(err error) error {
	var e *APIError
	if !errors.As(err, &e) {
		return err
	}
	var kind memory.Kind
	switch e.Status {
	case http.StatusNotFound:
		kind = memory.KindNotFound
	case http.StatusBadRequest:
		kind = memory.KindInvalidArgument
	case http.StatusRequestEntityTooLarge:
		kind = memory.KindTooLarge
	default:
		return err
	}
	return &memoryAPIError{mem: &memory.Error{Kind: kind, Message: e.Message}, api: e}
}

// memoryAPIError is a memory error that still unwraps to the API error
// (errors.Is(err, ErrNotFound) holds for a 404).
type memoryAPIError struct {
	mem *memory.Error
	api *APIError
}

func (e *memoryAPIError) Error() string { return e.mem.Error() }

func (e *memoryAPIError) Unwrap() []error { return []error{e.mem, e.api} }
