package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// tokenFlags choose where tokens are managed: a store directly (--store or
// RATH_STORE: the operator, who holds the database) or a coordinator's API
// (--server, RATH_SERVER or the logged-in server, with an admin token).
type tokenFlags struct {
	store  string
	server string
	token  string
	output string
}

func (f *tokenFlags) register(c *cobra.Command) {
	c.PersistentFlags().StringVar(&f.store, "store", "", "manage tokens in this store directly: postgres://… or sqlite:PATH (default $RATH_STORE)")
	c.PersistentFlags().StringVar(&f.server, "server", "", "manage tokens through this coordinator (default $RATH_SERVER, else the logged-in server, else "+defaultServer+")")
	c.PersistentFlags().StringVar(&f.token, "token", "", "admin API token for --server (env RATH_TOKEN, else the logged-in token)")
	c.PersistentFlags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

// tokenBackend is one of the two places tokens are managed.
type tokenBackend interface {
	create(ctx context.Context, req api.CreateTokenRequest) (api.CreatedToken, error)
	list(ctx context.Context) ([]api.Token, error)
	revoke(ctx context.Context, id string) (api.Token, error)
	close()
}

func (f *tokenFlags) open(ctx context.Context) (tokenBackend, error) {
	w, err := chooseTarget(f.store, f.server, f.token)
	if err != nil {
		return nil, err
	}
	storeURL := w.storeURL
	if storeURL == "" {
		cl, err := client.New(w.server, w.token)
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("--server: %w", err)}
		}
		return apiTokens{cl: cl}, nil
	}
	st, err := openStoreURL(ctx, storeURL, false)
	if err != nil {
		return nil, err
	}
	if sq, ok := st.(*sqlitestore.Store); ok {
		return storeTokens{st: auth.NewStore(sq.DB(), false), closer: st}, nil
	}
	db, err := sql.Open("pgx", pgstore.ConnURL(storeURL))
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("token store: %w", err)
	}
	return storeTokens{st: auth.NewStore(db, true), closer: st, db: db}, nil
}

type storeTokens struct {
	st     *auth.Store
	closer store.Store
	db     *sql.DB
}

func (s storeTokens) create(ctx context.Context, req api.CreateTokenRequest) (api.CreatedToken, error) {
	scope, err := auth.ParseScope(string(req.Scope))
	if err != nil {
		return api.CreatedToken{}, &exitError{code: 2, err: fmt.Errorf("--scope: %w", err)}
	}
	var ttl time.Duration
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil {
			return api.CreatedToken{}, &exitError{code: 2, err: fmt.Errorf("--ttl: %w", err)}
		}
	}
	t, secret, err := s.st.Create(ctx, auth.CreateParams{Name: req.Name, Tenant: req.Tenant, Scope: scope, TTL: ttl})
	return api.CreatedToken{Token: t.API(), Secret: secret}, err
}

func (s storeTokens) list(ctx context.Context) ([]api.Token, error) {
	ts, err := s.st.List(ctx, "")
	out := make([]api.Token, len(ts))
	for i, t := range ts {
		out[i] = t.API()
	}
	return out, err
}

func (s storeTokens) revoke(ctx context.Context, id string) (api.Token, error) {
	t, err := s.st.Revoke(ctx, id, "")
	return t.API(), err
}

func (s storeTokens) close() {
	if s.db != nil {
		_ = s.db.Close()
	}
	_ = s.closer.Close()
}

// apiTokens manages tokens through a coordinator's API (pkg/client).
type apiTokens struct{ cl *client.Client }

func (a apiTokens) create(ctx context.Context, req api.CreateTokenRequest) (api.CreatedToken, error) {
	return a.cl.CreateToken(ctx, req)
}

func (a apiTokens) list(ctx context.Context) ([]api.Token, error) { return a.cl.ListTokens(ctx) }

func (a apiTokens) revoke(ctx context.Context, id string) (api.Token, error) {
	return a.cl.RevokeToken(ctx, id)
}

func (apiTokens) close() {}

func newTokenCmd(env *Env) *cobra.Command {
	var f tokenFlags
	c := &cobra.Command{
		Use:   "token",
		Short: "create, list and revoke API tokens (docs/security.md)",
		Long: `API tokens authenticate rathctl and programs to a coordinator. A token has a
scope (read, submit or admin) and a tenant, is stored only as its SHA-256 hash,
and is shown once, when created. With --store (or RATH_STORE) the commands work
on the database directly (the operator's way to make the first token); otherwise
they go through the coordinator with an admin token.`,
	}
	f.register(c)
	with := func(fn func(ctx context.Context, b tokenBackend, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			b, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			defer b.close()
			return fn(cmd.Context(), b, args)
		}
	}

	var req api.CreateTokenRequest
	var scope string
	create := &cobra.Command{
		Use:   "create --scope read|submit|admin [--tenant T] [--name N] [--ttl D]",
		Short: "create a token and print it (once)",
		Args:  cobra.NoArgs,
		RunE: with(func(ctx context.Context, b tokenBackend, _ []string) error {
			if scope == "" {
				return &exitError{code: 2, err: errors.New("--scope is required (read, submit or admin)")}
			}
			req.Scope = api.Scope(scope)
			t, err := b.create(ctx, req)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return json.NewEncoder(env.Out).Encode(t)
			}
			_, err = fmt.Fprintf(env.Out, "%s\n", t.Secret)
			if err == nil {
				_, err = fmt.Fprintf(env.Err, "token %s (tenant %s, scope %s%s): store it now, it is not shown again\n",
					t.ID, t.Tenant, t.Scope, expiry(t.ExpiresAt))
			}
			return err
		}),
	}
	create.Flags().StringVar(&scope, "scope", "", "read, submit or admin")
	create.Flags().StringVar(&req.Tenant, "tenant", "", "the token's tenant (default: default, or the caller's through the API)")
	create.Flags().StringVar(&req.Name, "name", "", "a name to recognize the token by")
	create.Flags().StringVar(&req.TTL, "ttl", "", "expire after this long (Go duration, e.g. 720h); default never")

	list := &cobra.Command{
		Use:   "list",
		Short: "list tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: with(func(ctx context.Context, b tokenBackend, _ []string) error {
			ts, err := b.list(ctx)
			if err != nil {
				return err
			}
			if f.output == "json" {
				if ts == nil {
					ts = []api.Token{}
				}
				return json.NewEncoder(env.Out).Encode(api.TokenList{Tokens: ts})
			}
			tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tSCOPE\tNAME\tCREATED\tLAST USED\tSTATE")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Tenant, t.Scope, t.Name,
					t.CreatedAt.Format(time.RFC3339), when(t.LastUsedAt), state(t))
			}
			return tw.Flush()
		}),
	}

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "revoke a token",
		Long: `Revoke a token. Through a coordinator (--server), every coordinator refuses it
from its next request: the one that revoked it at once, the others when its
announcement reaches them over NATS. With --store no coordinator is told, and
one that verified the token shortly before keeps trusting it for up to its
--token-cache (default 1s; docs/security.md).`,
		Args: cobra.ExactArgs(1),
		RunE: with(func(ctx context.Context, b tokenBackend, args []string) error {
			t, err := b.revoke(ctx, args[0])
			if err != nil {
				return err
			}
			if f.output == "json" {
				return json.NewEncoder(env.Out).Encode(t)
			}
			if _, err = fmt.Fprintf(env.Out, "revoked %s (tenant %s, scope %s)\n", t.ID, t.Tenant, t.Scope); err != nil {
				return err
			}
			if _, direct := b.(storeTokens); direct {
				// Said on stderr: stdout stays the one line scripts read.
				_, err = fmt.Fprintln(env.Err, "note: revoked in the store, so no coordinator was told: one that verified the token shortly before trusts it for up to its --token-cache (default 1s); revoke through --server to have every coordinator refuse it at once")
			}
			return err
		}),
	}
	c.AddCommand(create, list, revoke)
	return c
}

func expiry(t *time.Time) string {
	if t == nil {
		return ""
	}
	return ", expires " + t.Format(time.RFC3339)
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func state(t api.Token) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case t.ExpiresAt != nil && !time.Now().Before(*t.ExpiresAt):
		return "expired"
	}
	return "active"
}
