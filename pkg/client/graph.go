package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// Graph is a [session.Graph] over the coordinator's API: sessions opened on
// it fork, append and merge in the calling program, and every new version
// is sealed here and committed through POST /v1/versions (the coordinator
// verifies its links and hash like any store). Graph keeps no cache: a
// redaction changes a stored chunk's content (never its hash), and it must
// take effect in every process as soon as `redact` returns, so every read
// asks the coordinator, whose own cache checks the redaction epoch
// (pkg/store). It is safe for concurrent use.
type Graph struct {
	c *Client
}

// Graph returns the coordinator's Session Graph as a session.Graph.
func (c *Client) Graph() *Graph {
	return &Graph{c: c}
}

var _ session.Graph = (*Graph)(nil)

// Put implements [session.Graph].
func (g *Graph) Put(ctx context.Context, v *session.Version) (*session.Version, error) {
	var out session.Version
	if err := g.c.Do(ctx, http.MethodPost, "/v1/versions", v, &out); err != nil {
		return nil, translate(err)
	}
	return &out, nil
}

// Get implements [session.Graph].
func (g *Graph) Get(ctx context.Context, id session.ID) (*session.Version, error) {
	var out session.Version
	if err := g.c.Do(ctx, http.MethodGet, "/v1/versions/"+url.PathEscape(id.String()), nil, &out); err != nil {
		return nil, translate(err)
	}
	if out.ID != id {
		// A reply for another version (or none, as null or {}) must not be
		// returned.
		return nil, fmt.Errorf("GET /v1/versions/%s: the reply holds version %q, not the one asked for", id, out.ID)
	}
	return &out, nil
}

// Transcript implements [session.Graph].
func (g *Graph) Transcript(ctx context.Context, id session.ID) ([]session.Chunk, error) {
	var out struct {
		Chunks []session.Chunk `json:"chunks"`
	}
	if err := g.c.Do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id.String())+"/transcript", nil, &out); err != nil {
		return nil, translate(err)
	}
	return out.Chunks, nil
}

// CommonBase implements [session.Graph].
func (g *Graph) CommonBase(ctx context.Context, a, b session.ID) (session.ID, bool, error) {
	var out api.CommonBase
	p := "/v1/versions/" + url.PathEscape(a.String()) + "/common-base?with=" + url.QueryEscape(b.String())
	if err := g.c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return session.ID{}, false, translate(err)
	}
	if out.Base == nil {
		return session.ID{}, false, nil
	}
	return *out.Base, true, nil
}

// translate maps a 404 to session.ErrNotFound, so callers of the Graph
// see the contract's errors; others pass through.
func translate(err error) error {
	var e *APIError
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return &notFound{e}
	}
	return err
}

type notFound struct{ *APIError }

func (e *notFound) Unwrap() error { return session.ErrNotFound }
