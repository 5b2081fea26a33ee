package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// sessionGraph is what the session commands do to the Session Graph. There
// are two implementations, so each command is written once: storeGraph
// works on a store directly, apiGraph through a coordinator's HTTP API.
//
// Both return the API's own types (pkg/api), which `-o json` prints.
type sessionGraph interface {
	New(ctx context.Context, chunks []session.Chunk) (api.Version, error)
	Append(ctx context.Context, id session.ID, chunks []session.Chunk) (api.Version, error)
	Show(ctx context.Context, id session.ID) (api.Version, []session.Chunk, error)
	Ancestors(ctx context.Context, id session.ID, depth int) (api.Relatives, error)
	Fork(ctx context.Context, id session.ID) (api.Version, error)
	Detach(ctx context.Context, id session.ID) (api.Version, error)
	Merge(ctx context.Context, a, b session.ID) (api.Version, error)
	Place(ctx context.Context, id session.ID, p session.Placement) (api.Version, error)
	List(ctx context.Context, p store.ListParams) (api.SessionList, error)
	Export(ctx context.Context, id session.ID, w io.Writer) error
	Import(ctx context.Context, r io.Reader) (api.ImportResult, error)
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

// choose applies chooseTarget to the flags (the root has checked -o).
func (f *sessionFlags) choose() (where, error) {
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

// info is a session as the API returns it.
func info(s session.Session, err error) (api.Version, error) {
	if err != nil {
		return api.Version{}, err
	}
	v := s.Version()
	chunks := v.Chunks
	if chunks == nil {
		chunks = []session.Chunk{}
	}
	return api.Version{Info: store.InfoOf(v), Chunks: chunks}, nil
}

func (g storeGraph) New(ctx context.Context, chunks []session.Chunk) (api.Version, error) {
	return info(session.New(ctx, g.st, chunks...))
}

func (g storeGraph) Append(ctx context.Context, id session.ID, chunks []session.Chunk) (api.Version, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return api.Version{}, err
	}
	return info(s.Append(ctx, chunks...))
}

func (g storeGraph) Show(ctx context.Context, id session.ID) (api.Version, []session.Chunk, error) {
	v, err := info(g.open(ctx, id))
	if err != nil {
		return api.Version{}, nil, err
	}
	chunks, err := g.st.Transcript(ctx, id)
	if err != nil {
		return api.Version{}, nil, err
	}
	return v, chunks, nil
}

func (g storeGraph) Ancestors(ctx context.Context, id session.ID, depth int) (api.Relatives, error) {
	rel, err := g.st.Ancestors(ctx, id, depth)
	if err != nil {
		return api.Relatives{}, err
	}
	if rel == nil {
		rel = []store.Relative{}
	}
	return api.Relatives{ID: id, Versions: rel}, nil
}

func (g storeGraph) Fork(ctx context.Context, id session.ID) (api.Version, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return api.Version{}, err
	}
	return info(s.Fork(ctx))
}

func (g storeGraph) Detach(ctx context.Context, id session.ID) (api.Version, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return api.Version{}, err
	}
	return info(s.Detach(ctx))
}

func (g storeGraph) Place(ctx context.Context, id session.ID, p session.Placement) (api.Version, error) {
	s, err := g.open(ctx, id)
	if err != nil {
		return api.Version{}, err
	}
	return info(s.To(ctx, p))
}

func (g storeGraph) Merge(ctx context.Context, a, b session.ID) (api.Version, error) {
	sa, err := g.open(ctx, a)
	if err != nil {
		return api.Version{}, err
	}
	sb, err := g.open(ctx, b)
	if err != nil {
		return api.Version{}, err
	}
	return info(sa.Merge(ctx, sb))
}

func (g storeGraph) List(ctx context.Context, p store.ListParams) (api.SessionList, error) {
	return g.st.List(ctx, p)
}

func (g storeGraph) Export(ctx context.Context, id session.ID, w io.Writer) error {
	return session.Export(ctx, g.st, id, w)
}

func (g storeGraph) Import(ctx context.Context, r io.Reader) (api.Version, error) {
	return info(session.Import(ctx, g.st, r))
}

// apiGraph works through the coordinator's API (docs/api.md), with the
// typed methods of pkg/client.
type apiGraph struct{ cl *client.Client }

func (g apiGraph) Close() error { return nil }

func apiInfo(v *api.Version, err error) (api.Version, error) {
	if err != nil {
		return api.Version{}, err
	}
	return *v, nil
}

func (g apiGraph) New(ctx context.Context, chunks []session.Chunk) (api.Version, error) {
	return apiInfo(g.cl.NewSession(ctx, api.SessionRequest{Chunks: chunks}))
}

func (g apiGraph) Append(ctx context.Context, id session.ID, chunks []session.Chunk) (api.Version, error) {
	return apiInfo(g.cl.Append(ctx, id, api.SessionRequest{Chunks: chunks}))
}

func (g apiGraph) Show(ctx context.Context, id session.ID) (api.Version, []session.Chunk, error) {
	v, err := g.cl.GetSession(ctx, id)
	if err != nil {
		return api.Version{}, nil, err
	}
	tr, err := g.cl.Transcript(ctx, id)
	if err != nil {
		return api.Version{}, nil, err
	}
	return *v, tr.Chunks, nil
}

func (g apiGraph) Ancestors(ctx context.Context, id session.ID, depth int) (api.Relatives, error) {
	rel, err := g.cl.Ancestors(ctx, id, depth)
	if err != nil {
		return api.Relatives{}, err
	}
	return *rel, nil
}

func (g apiGraph) Fork(ctx context.Context, id session.ID) (api.Version, error) {
	return apiInfo(g.cl.Fork(ctx, id))
}

func (g apiGraph) Detach(ctx context.Context, id session.ID) (api.Version, error) {
	return apiInfo(g.cl.Detach(ctx, id))
}

func (g apiGraph) Place(ctx context.Context, id session.ID, p session.Placement) (api.Version, error) {
	return apiInfo(g.cl.Place(ctx, id, p))
}

func (g apiGraph) Merge(ctx context.Context, a, b session.ID) (api.Version, error) {
	return apiInfo(g.cl.Merge(ctx, a, b))
}

func (g apiGraph) List(ctx context.Context, p store.ListParams) (api.SessionList, error) {
	page, err := g.cl.ListSessions(ctx, p)
	if err != nil {
		return api.SessionList{}, err
	}
	return *page, nil
}

func (g apiGraph) Export(ctx context.Context, id session.ID, w io.Writer) error {
	return g.cl.Export(ctx, id, w, client.ExportRath)
}

func (g apiGraph) Import(ctx context.Context, r io.Reader) (api.ImportResult, error) {
	imp, err := g.cl.Import(ctx, r, openrath.FormatRath)
	if err != nil {
		return api.ImportResult{}, err
	}
	return imp.Head, nil
}

// sessionPath is the API path of a version's endpoint op ("" for the
// version itself).
func sessionPath(id session.ID, op string) string {
	p := "/v1/sessions/" + url.PathEscape(id.String())
	if op != "" {
		p += "/" + op
	}
	return p
}
