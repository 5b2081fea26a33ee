package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
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
	t, err := g.c.Transcript(ctx, id)
	if err != nil {
		return nil, err
	}
	return t.Chunks, nil
}

// CommonBase implements [session.Graph].
func (g *Graph) CommonBase(ctx context.Context, a, b session.ID) (session.ID, bool, error) {
	var out api.CommonBase
	p := versionPath(a, "common-base") + "?with=" + url.QueryEscape(b.String())
	if err := g.c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return session.ID{}, false, translate(err)
	}
	if out.Base == nil {
		return session.ID{}, false, nil
	}
	return *out.Base, true, nil
}

// Ancestors returns the versions id descends from, nearest first, up to
// maxDepth edges away (0: no limit), as a store does; with Descendants and
// List it makes Graph a [lineage.Source], so pkg/lineage (blame, diff,
// graphs) runs over the API too.
func (g *Graph) Ancestors(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error) {
	rel, err := g.c.Ancestors(ctx, id, maxDepth)
	if err != nil {
		return nil, err
	}
	return rel.Versions, nil
}

// Descendants returns the versions descending from id, nearest first, up
// to maxDepth edges away (0: no limit).
func (g *Graph) Descendants(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error) {
	rel, err := g.c.Descendants(ctx, id, maxDepth)
	if err != nil {
		return nil, err
	}
	return rel.Versions, nil
}

// List returns a page of versions in commit order.
func (g *Graph) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	page, err := g.c.ListSessions(ctx, p)
	if err != nil {
		return store.Page{}, err
	}
	return *page, nil
}

var _ lineage.Source = (*Graph)(nil)

// sentinels are the session errors the coordinator reports, by status,
// most specific first: its error body carries the wrapped error's text
// (docs/api.md), so a reply is matched to the sentinel whose text it
// holds. ErrInvalidID comes before ErrInvalidVersion, whose text is a
// prefix of it.
var sentinels = []struct {
	status int
	err    error
}{
	{http.StatusBadRequest, session.ErrHashMismatch},
	{http.StatusBadRequest, session.ErrInvalidID},
	{http.StatusBadRequest, session.ErrInvalidChunk},
	{http.StatusBadRequest, session.ErrInvalidVersion},
	{http.StatusBadRequest, session.ErrFormat},
	{http.StatusConflict, session.ErrIncompatiblePlacement},
	{http.StatusConflict, session.ErrConflict},
	{http.StatusRequestEntityTooLarge, session.ErrTooLarge},
	{http.StatusServiceUnavailable, session.ErrUnavailable},
}

// translate makes an error reply match the session package's error it
// reports, so callers of the Graph (and of the session methods) see the
// contract's errors: every 404 is session.ErrNotFound, every 409 at least
// session.ErrConflict, a 400 the sentinel its message names. The
// [*APIError] stays reachable through errors.As.
func translate(err error) error {
	var e *APIError
	if !errors.As(err, &e) {
		return err
	}
	switch e.Status {
	case http.StatusNotFound:
		return &sessionError{e, session.ErrNotFound}
	case http.StatusConflict:
		if !strings.Contains(e.Message, session.ErrIncompatiblePlacement.Error()) {
			return &sessionError{e, session.ErrConflict}
		}
	}
	for _, s := range sentinels {
		if s.status == e.Status && strings.Contains(e.Message, s.err.Error()) {
			return &sessionError{e, s.err}
		}
	}
	return err
}

// sessionError is an error reply that also matches a session error.
type sessionError struct {
	*APIError
	sentinel error
}

func (e *sessionError) Unwrap() []error { return []error{e.APIError, e.sentinel} }

// GraphOptions choose what [Client.SessionGraph] draws. The zero value
// draws the version and every version descending from it.
type GraphOptions struct {
	// Around draws the versions up to Depth edges around the version,
	// ancestors and descendants (Depth 0: all of them), with the version
	// marked as the output.
	Around bool
	Depth  int
}

func graphQuery(format lineage.Format, o GraphOptions) (string, error) {
	q := url.Values{}
	if format != "" {
		q.Set("format", string(format))
	}
	if o.Around {
		if o.Depth < 0 {
			return "", fmt.Errorf("depth %d: want >= 0 (0: all)", o.Depth)
		}
		q.Set("depth", strconv.Itoa(o.Depth))
	}
	if len(q) == 0 {
		return "", nil
	}
	return "?" + q.Encode(), nil
}

// SessionGraph returns the lineage graph around version id (GET
// /v1/sessions/{id}/graph) as JSON nodes and edges.
func (c *Client) SessionGraph(ctx context.Context, id session.ID, o GraphOptions) (*api.Graph, error) {
	q, err := graphQuery("", o)
	if err != nil {
		return nil, fmt.Errorf("graph of %s: %w", id, err)
	}
	var g api.Graph
	if err := c.call(ctx, http.MethodGet, sessionPath(id, "graph")+q, nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// WriteSessionGraph writes the graph [Client.SessionGraph] returns to w as
// a document in format (svg, dot, mermaid, json or openrath-jsonl),
// rendered by the coordinator.
func (c *Client) WriteSessionGraph(ctx context.Context, id session.ID, o GraphOptions, format api.GraphFormat, w io.Writer) error {
	if _, err := lineage.ParseFormat(string(format)); err != nil {
		return fmt.Errorf("graph of %s: %w", id, err)
	}
	q, err := graphQuery(format, o)
	if err != nil {
		return fmt.Errorf("graph of %s: %w", id, err)
	}
	return translate(c.Stream(ctx, http.MethodGet, sessionPath(id, "graph")+q, nil, "", w))
}

func runOpPath(runID, op string) (string, error) {
	if runID == "" {
		return "", errors.New("run id: required")
	}
	return "/v1/runs/" + url.PathEscape(runID) + "/" + op, nil
}

// RunGraph returns the lineage graph of what run runID made (GET
// /v1/runs/{id}/graph): its input, every version its steps made, the
// output and the route to it.
func (c *Client) RunGraph(ctx context.Context, runID string) (*api.Graph, error) {
	p, err := runOpPath(runID, "graph")
	if err != nil {
		return nil, err
	}
	var g api.Graph
	if err := c.call(ctx, http.MethodGet, p, nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// WriteRunGraph writes a run's graph to w as a document in format.
func (c *Client) WriteRunGraph(ctx context.Context, runID string, format api.GraphFormat, w io.Writer) error {
	p, err := runOpPath(runID, "graph")
	if err != nil {
		return err
	}
	if _, err := lineage.ParseFormat(string(format)); err != nil {
		return fmt.Errorf("graph of run %s: %w", runID, err)
	}
	q, err := graphQuery(format, GraphOptions{})
	if err != nil {
		return err
	}
	return translate(c.Stream(ctx, http.MethodGet, p+q, nil, "", w))
}

// Blame says who produced each chunk of version id's transcript (GET
// /v1/sessions/{id}/blame): version, op, run, step, agent, model, worker,
// tool call and workspace.
func (c *Client) Blame(ctx context.Context, id session.ID) (*api.Blame, error) {
	var b api.Blame
	if err := c.call(ctx, http.MethodGet, sessionPath(id, "blame"), nil, &b); err != nil {
		return nil, err
	}
	return &b, nil
}
