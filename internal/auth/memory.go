package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/pgmem"
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
