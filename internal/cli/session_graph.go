package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// sessionGraph is what the session commands do to the Session Graph. There
// are two implementations, so each command is written once: storeGraph
// works on a store directly, apiGraph through a coordinator's HTTP API.
type sessionGraph interface {
	New(ctx context.Context, chunks []session.Chunk) (store.Info, error)
	Append(ctx context.Context, id session.ID, chunks []session.Chunk) (store.Info, error)
	Show(ctx context.Context, id session.ID) (store.Info, []session.Chunk, error)
	Ancestors(ctx context.Context, id session.ID, depth int) ([]store.Relative, error)
	Fork(ctx context.Context, id session.ID) (store.Info, error)
	Detach(ctx context.Context, id session.ID) (store.Info, error)
	Merge(ctx context.Context, a, b session.ID) (store.Info, error)
	Place(ctx context.Context, id session.ID, p session.Placement) (store.Info, error)
	List(ctx context.Context, p store.ListParams) (store.Page, error)
	Export(ctx context.Context, id session.ID, w io.Writer) error
	Import(ctx context.Context, r io.Reader) (store.Info, error)
	Close() error
}

// sessionFlags choose the graph with the rules of chooseTarget: a store
// directly only when --store or RATH_STORE names one, else a coordinator
// (--server, RATH_SERVER, the logged-in server, the default).
type sessionFlags struct {
	storeFlags
	server string
	token  string
}

func (f *sessionFlags) register(c *cobra.Command) {
	f.storeFlags.register(c)
	c.PersistentFlags().StringVar(&f.server, "server", "", "coordinator URL (default $RATH_SERVER, else the logged-in server, else "+defaultServer+")")
	c.PersistentFlags().StringVar(&f.token, "token", "", "API bearer token (default $RATH_TOKEN, else the logged-in token)")
}

// choose applies chooseTarget to the flags, after checking -o.
func (f *sessionFlags) choose() (where, error) {
	if f.output != "text" && f.output != "json" {
		return where{}, &exitError{code: 2, err: fmt.Errorf("--output must be text or json, not %q", f.output)}
	}
	return chooseTarget(f.url, f.server, f.token)
}

func (f *sessionFlags) open(ctx context.Context) (sessionGraph, error) {
	w, err := f.choose()
	if err != nil {
		return nil, err
	}
	if w.storeURL != "" {
		st, err := openStoreURL(ctx, w.storeURL, false)
		if err != nil {
			return nil, err
		}
		return storeGraph{st}, nil
	}
	cl, err := client.New(w.server, w.token)
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--server: %w", err)}
	}
	return apiGraph{cl}, nil
}

// with wraps a command body that needs the graph.
func (f *sessionFlags) with(fn func(ctx context.Context, g sessionGraph, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		g, err := f.open(cmd.Context())
		if err != nil {
			return err
		}
		defer g.Close()
		return fn(cmd.Context(), g, args)
	}
}

// storeGraph works on a store directly.
type storeGraph struct{ st store.Store }

func (g storeGraph) Close() error { return g.st.Close() }

func (g storeGraph) open(ctx context.Context, id session.ID) (session.Session, error) {
	return session.Open(ctx, g.st, id)
}

func info(s session.Session, err error) (store.Info, error) {
	if err != nil {
		return store.Info{}, err
	}
	return store.InfoOf(s.Version()), nil
}

func (g storeGraph) New(ctx context.Context, chunks []session.Chunk) (store.Info, error) {
	return info(session.New(ctx, g.st, chunks...))
}

func (g storeGraph) Append(ctx context.Context, id session.ID, chunks []session.Chunk) (store.Info, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return store.Info{}, err
	}
	return info(s.Append(ctx, chunks...))
}

func (g storeGraph) Show(ctx context.Context, id session.ID) (store.Info, []session.Chunk, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return store.Info{}, nil, err
	}
	chunks, err := s.Chunks(ctx)
	if err != nil {
		return store.Info{}, nil, err
	}
	return store.InfoOf(s.Version()), chunks, nil
}

func (g storeGraph) Ancestors(ctx context.Context, id session.ID, depth int) ([]store.Relative, error) {
	return g.st.Ancestors(ctx, id, depth)
}

func (g storeGraph) Fork(ctx context.Context, id session.ID) (store.Info, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return store.Info{}, err
	}
	return info(s.Fork(ctx))
}

func (g storeGraph) Detach(ctx context.Context, id session.ID) (store.Info, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return store.Info{}, err
	}
	return info(s.Detach(ctx))
}

func (g storeGraph) Place(ctx context.Context, id session.ID, p session.Placement) (store.Info, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return store.Info{}, err
	}
	return info(s.To(ctx, p))
}

func (g storeGraph) Merge(ctx context.Context, a, b session.ID) (store.Info, error) {
	sa, err := g.open(ctx, a)
	if err != nil {
		return store.Info{}, err
	}
	sb, err := g.open(ctx, b)
	if err != nil {
		return store.Info{}, err
	}
	return info(sa.Merge(ctx, sb))
}

func (g storeGraph) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	return g.st.List(ctx, p)
}

func (g storeGraph) Export(ctx context.Context, id session.ID, w io.Writer) error {
	return session.Export(ctx, g.st, id, w)
}

func (g storeGraph) Import(ctx context.Context, r io.Reader) (store.Info, error) {
	return info(session.Import(ctx, g.st, r))
}

// apiGraph works through the coordinator's API (docs/api.md).
type apiGraph struct{ cl *client.Client }

func (g apiGraph) Close() error { return nil }

func sessionPath(id session.ID, op string) string {
	p := "/v1/sessions/" + url.PathEscape(id.String())
	if op != "" {
		p += "/" + op
	}
	return p
}

func (g apiGraph) post(ctx context.Context, path string, body any) (store.Info, error) {
	var in store.Info
	err := g.cl.Do(ctx, http.MethodPost, path, body, &in)
	return in, err
}

// messages turns chunks into the API's request body.
func messages(chunks []session.Chunk) map[string]any {
	return map[string]any{"chunks": chunks}
}

func (g apiGraph) New(ctx context.Context, chunks []session.Chunk) (store.Info, error) {
	return g.post(ctx, "/v1/sessions", messages(chunks))
}

func (g apiGraph) Append(ctx context.Context, id session.ID, chunks []session.Chunk) (store.Info, error) {
	return g.post(ctx, sessionPath(id, "append"), messages(chunks))
}

func (g apiGraph) Show(ctx context.Context, id session.ID) (store.Info, []session.Chunk, error) {
	var in store.Info
	if err := g.cl.Do(ctx, http.MethodGet, sessionPath(id, ""), nil, &in); err != nil {
		return store.Info{}, nil, err
	}
	var tr struct {
		Chunks []session.Chunk `json:"chunks"`
	}
	if err := g.cl.Do(ctx, http.MethodGet, sessionPath(id, "transcript"), nil, &tr); err != nil {
		return store.Info{}, nil, err
	}
	return in, tr.Chunks, nil
}

func (g apiGraph) Ancestors(ctx context.Context, id session.ID, depth int) ([]store.Relative, error) {
	var res struct {
		Versions []store.Relative `json:"versions"`
	}
	err := g.cl.Do(ctx, http.MethodGet, sessionPath(id, "ancestors")+"?depth="+strconv.Itoa(depth), nil, &res)
	return res.Versions, err
}

func (g apiGraph) Fork(ctx context.Context, id session.ID) (store.Info, error) {
	return g.post(ctx, sessionPath(id, "fork"), nil)
}

func (g apiGraph) Detach(ctx context.Context, id session.ID) (store.Info, error) {
	return g.post(ctx, sessionPath(id, "detach"), nil)
}

func (g apiGraph) Place(ctx context.Context, id session.ID, p session.Placement) (store.Info, error) {
	return g.post(ctx, sessionPath(id, "place"), p)
}

func (g apiGraph) Merge(ctx context.Context, a, b session.ID) (store.Info, error) {
	return g.post(ctx, sessionPath(a, "merge"), map[string]string{"other": b.String()})
}

func (g apiGraph) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	q := url.Values{}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.RootsOnly {
		q.Set("roots", "true")
	}
	if p.Run != "" {
		q.Set("run", p.Run)
	}
	var page store.Page
	err := g.cl.Do(ctx, http.MethodGet, "/v1/sessions?"+q.Encode(), nil, &page)
	return page, err
}

func (g apiGraph) Export(ctx context.Context, id session.ID, w io.Writer) error {
	return g.cl.Stream(ctx, http.MethodGet, sessionPath(id, "export"), nil, "", w)
}

func (g apiGraph) Import(ctx context.Context, r io.Reader) (store.Info, error) {
	var out bytes.Buffer
	if err := g.cl.Stream(ctx, http.MethodPost, "/v1/sessions/import", r, "application/x-ndjson", &out); err != nil {
		return store.Info{}, err
	}
	var in store.Info
	if err := json.Unmarshal(out.Bytes(), &in); err != nil {
		return store.Info{}, fmt.Errorf("import: decode reply: %w", err)
	}
	return in, nil
}
