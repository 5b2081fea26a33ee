package auth

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/pgmem"
	"github.com/rath-run/rath/pkg/session"
)

// Memory returns tenant's memory store: a pgmem store whose connections
// carry the tenant and act as [TenantRole] (or as a login user row-level
// security holds), like For's graph store. Row-level security (migration
// 00015) then confines it to the namespaces the tenant owns: another
// tenant's namespace reads as empty, and writing to it fails (SQLSTATE
// 42501). Its first write to a namespace nobody owns claims it. The store
// belongs to the pools: do not close it, Close does.
func (p *TenantPools) Memory(ctx context.Context, tenant string) (memory.Store, error) {
	if err := ValidTenant(tenant); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("tenant pools: closed")
	}
	if m, ok := p.mems[tenant]; ok {
		return m, nil
	}
	var firstErr error
	for _, setRole := range []bool{true, false} {
		u, err := p.tenantURL(tenant, setRole)
		if err != nil {
			return nil, err
		}
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			// Never quote the URL: it may hold a password.
			return nil, fmt.Errorf("tenant %s: memory store: the database URL does not parse", tenant)
		}
		cfg.MaxConns = int32(p.maxConns)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err == nil {
			err = pool.Ping(ctx)
		}
		if err != nil {
			if pool != nil {
				pool.Close()
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if err := checkConfined(ctx, pool.QueryRow, tenant); err != nil {
			pool.Close()
			return nil, err
		}
		if p.mems == nil {
			p.mems = map[string]*pgmem.Store{}
		}
		m := pgmem.New(pool)
		p.mems[tenant] = m
		return m, nil
	}
	return nil, fmt.Errorf("tenant %s: open memory store: %w", tenant, firstErr)
}

// MemoryRouter is the memory store of processes that serve every tenant
// (workers): a call acting for a session version ([memory.WithVersion], or
// a write's VersionID) goes to that version's tenant's confined store
// ([TenantPools.Memory]), so an agent recalls and commits only in
// namespaces its run's tenant owns. A call acting for no version is system
// work and goes to System (rathctl with store access, tools). A version
// that does not exist fails the call: never the system store.
type MemoryRouter struct {
	System *pgmem.Store
	Pools  *TenantPools
}

// store returns the store a call acting for version goes to: System when
// there is none, else the confined store of the version's tenant (looked up
// on System's connections).
func (m *MemoryRouter) store(ctx context.Context, version string) (memory.Store, error) {
	if version == "" {
		return m.System, nil
	}
	id, err := session.ParseID(version)
	if err != nil {
		return nil, &memory.Error{Kind: memory.KindInvalidArgument, Message: fmt.Sprintf("version %q: %v", version, err)}
	}
	var tenant string
	if err := m.System.DB().QueryRowContext(ctx, `SELECT tenant FROM versions WHERE id = $1`, id.String()).Scan(&tenant); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, &memory.Error{Kind: memory.KindNotFound, Message: fmt.Sprintf("version %s: no such version, so no tenant to act for", id)}
		}
		return nil, fmt.Errorf("memory: tenant of version %s: %w", id, err)
	}
	return m.Pools.Memory(ctx, tenant)
}

// Remember writes for w.VersionID's tenant, else the context's version's.
func (m *MemoryRouter) Remember(ctx context.Context, ns string, w memory.Write) (memory.Item, error) {
	st, err := m.store(ctx, cmp.Or(w.VersionID, memory.VersionFrom(ctx)))
	if err != nil {
		return memory.Item{}, err
	}
	return st.Remember(ctx, ns, w)
}

// Read reads for the context's version's tenant.
func (m *MemoryRouter) Read(ctx context.Context, ns, uri string) (memory.Item, error) {
	st, err := m.store(ctx, memory.VersionFrom(ctx))
	if err != nil {
		return memory.Item{}, err
	}
	return st.Read(ctx, ns, uri)
}

// List lists for the context's version's tenant.
func (m *MemoryRouter) List(ctx context.Context, ns string, opts memory.ListOptions) ([]memory.Item, error) {
	st, err := m.store(ctx, memory.VersionFrom(ctx))
	if err != nil {
		return nil, err
	}
	return st.List(ctx, ns, opts)
}

// Delete deletes for versionID's tenant, else the context's version's.
func (m *MemoryRouter) Delete(ctx context.Context, ns, uri, versionID string) error {
	st, err := m.store(ctx, cmp.Or(versionID, memory.VersionFrom(ctx)))
	if err != nil {
		return err
	}
	return st.Delete(ctx, ns, uri, versionID)
}

// Recall recalls for the context's version's tenant.
func (m *MemoryRouter) Recall(ctx context.Context, ns string, q memory.Query) ([]memory.Hit, error) {
	st, err := m.store(ctx, memory.VersionFrom(ctx))
	if err != nil {
		return nil, err
	}
	return st.Recall(ctx, ns, q)
}

// Vectors reads cached embeddings for the context's version's tenant.
func (m *MemoryRouter) Vectors(ctx context.Context, ns, model string) (map[string]memory.StoredVector, error) {
	st, err := m.store(ctx, memory.VersionFrom(ctx))
	if err != nil {
		return nil, err
	}
	vc, ok := st.(memory.VectorCache)
	if !ok {
		return nil, errors.New("memory: the tenant's store caches no vectors")
	}
	return vc.Vectors(ctx, ns, model)
}

// PutVectors caches embeddings for the context's version's tenant.
func (m *MemoryRouter) PutVectors(ctx context.Context, ns, model string, vs []memory.StoredVector) error {
	st, err := m.store(ctx, memory.VersionFrom(ctx))
	if err != nil {
		return err
	}
	vc, ok := st.(memory.VectorCache)
	if !ok {
		return errors.New("memory: the tenant's store caches no vectors")
	}
	return vc.PutVectors(ctx, ns, model, vs)
}

// Close closes the system store and the tenant pools.
func (m *MemoryRouter) Close() error {
	return errors.Join(m.System.Close(), m.Pools.Close())
}
