package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/memory/pgmem"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// TenantRole is the Postgres role a tenant pool acts as (SET ROLE at
// connect time), so that row-level security applies even when the
// coordinator logs in as a superuser or the tables' owner.
const TenantRole = "rath_coordinator"

// TenantPools opens, per tenant, a Postgres graph store and run store whose
// connections carry that tenant (the setting rath.tenant) and act as
// [TenantRole] (or, when that role does not exist, as the login user, if
// row-level security holds it): row-level security (migration 00011) then
// shows and accepts only that tenant's rows. A connection that would
// bypass row-level security (a superuser or BYPASSRLS role) is refused. Pools open on first use and stay open
// until Close. It is safe for concurrent use.
type TenantPools struct {
	url string
	// MaxConns bounds each tenant's graph pool and run pool; default 4.
	maxConns int

	mu     sync.Mutex
	pools  map[string]*tenantPool
	mems   map[string]*pgmem.Store // Memory's, per tenant
	closed bool
}

type tenantPool struct {
	graph *pgstore.Store
	runs  *runs.Store
	db    *sql.DB
}

// NewTenantPools returns pools over the Postgres database at dbURL (a
// postgres:// URL). maxConns bounds each tenant's pools (0: 4).
func NewTenantPools(dbURL string, maxConns int) (*TenantPools, error) {
	if !strings.HasPrefix(dbURL, "postgres://") && !strings.HasPrefix(dbURL, "postgresql://") {
		return nil, errors.New("tenant pools: want a postgres:// URL")
	}
	if maxConns <= 0 {
		maxConns = 4
	}
	return &TenantPools{url: dbURL, maxConns: maxConns, pools: map[string]*tenantPool{}}, nil
}

// tenantURL returns the database URL with the tenant (and, when setRole,
// the role) set as connection parameters. The tenant was validated, so it
// needs no quoting beyond URL encoding.
func (p *TenantPools) tenantURL(tenant string, setRole bool) (string, error) {
	u, err := url.Parse(p.url)
	if err != nil {
		// Never quote the URL: it may hold a password.
		return "", errors.New("tenant pools: the database URL does not parse")
	}
	q := u.Query()
	q.Set("rath.tenant", tenant)
	if setRole {
		q.Set("role", TenantRole)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// openGraph opens tenant's graph store acting as TenantRole, or, when that
// role cannot be taken (the migration could not create it), as the login
// user, which checkConfined then holds to row-level security.
func (p *TenantPools) openGraph(ctx context.Context, tenant string) (*pgstore.Store, string, error) {
	var firstErr error
	for _, setRole := range []bool{true, false} {
		u, err := p.tenantURL(tenant, setRole)
		if err != nil {
			return nil, "", err
		}
		g, err := pgstore.Open(ctx, u, pgstore.Options{MaxConns: int32(p.maxConns)})
		if err == nil {
			return g, u, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, "", fmt.Errorf("tenant %s: open graph store: %w", tenant, firstErr)
}

// For returns tenant's graph store and run store.
func (p *TenantPools) For(ctx context.Context, tenant string) (store.Store, *runs.Store, error) {
	if err := ValidTenant(tenant); err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, errors.New("tenant pools: closed")
	}
	if tp, ok := p.pools[tenant]; ok {
		return tp.graph, tp.runs, nil
	}
	g, u, err := p.openGraph(ctx, tenant)
	if err != nil {
		return nil, nil, err
	}
	if err := checkConfined(ctx, g.Pool().QueryRow, tenant); err != nil {
		_ = g.Close()
		return nil, nil, err
	}
	rs, db, err := runs.Open(ctx, u)
	if err != nil {
		_ = g.Close()
		return nil, nil, fmt.Errorf("tenant %s: open run store: %w", tenant, err)
	}
	db.SetMaxOpenConns(p.maxConns)
	db.SetMaxIdleConns(p.maxConns)
	p.pools[tenant] = &tenantPool{graph: g, runs: rs, db: db}
	return g, rs, nil
}

// checkConfined fails closed unless a tenant connection carries the tenant
// and is subject to row-level security (not a superuser, no BYPASSRLS).
func checkConfined[R interface{ Scan(...any) error }](ctx context.Context, queryRow func(context.Context, string, ...any) R, tenant string) error {
	var got string
	var bypass bool
	err := queryRow(ctx, `SELECT coalesce(current_setting('rath.tenant', true), ''),
		(SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)`).Scan(&got, &bypass)
	if err != nil {
		return fmt.Errorf("tenant %s: check the connection: %w", tenant, err)
	}
	if got != tenant || bypass {
		return fmt.Errorf("tenant %s: connections are not confined to the tenant (setting %q, bypasses row-level security: %t)", tenant, got, bypass)
	}
	return nil
}

// Close closes every tenant's pools.
func (p *TenantPools) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for t, tp := range p.pools {
		errs = append(errs, tp.graph.Close(), tp.db.Close())
		delete(p.pools, t)
	}
	for t, m := range p.mems {
		errs = append(errs, m.Close())
		delete(p.mems, t)
	}
	return errors.Join(errs...)
}

// Retention returns tenant's graph store and a [lineage.Retention] over its
// confined run-store connections: gc, pins, redaction and the invariant
// checker then see and change only that tenant's rows (migration 00019:
// row-level security on pins and redactions, rath_gc and rath_redact
// held to the connection's tenant).
func (p *TenantPools) Retention(ctx context.Context, tenant string) (store.Store, lineage.Retention, error) {
	g, _, err := p.For(ctx, tenant)
	if err != nil {
		return nil, lineage.Retention{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tp, ok := p.pools[tenant]
	if !ok {
		return nil, lineage.Retention{}, errors.New("tenant pools: closed")
	}
	return g, lineage.Retention{DB: tp.db, Dialect: lineage.Postgres}, nil
}
