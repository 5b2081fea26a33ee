package coordinator

import (
	"context"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// tenantGraph is the coordinator's graph store: each call goes to the store
// its context is bound to (the request's tenant's confined store, see
// Coordinator.auth), else to the coordinator's own. The handlers can then
// use one store and still see only their tenant's rows.
type tenantGraph struct{ c *Coordinator }

var _ store.Store = tenantGraph{}

func (g tenantGraph) of(ctx context.Context) store.Store { return g.c.graphOf(ctx) }

func (g tenantGraph) Put(ctx context.Context, v *session.Version) (*session.Version, error) {
	return g.of(ctx).Put(ctx, v)
}

func (g tenantGraph) Get(ctx context.Context, id session.ID) (*session.Version, error) {
	return g.of(ctx).Get(ctx, id)
}

func (g tenantGraph) Transcript(ctx context.Context, id session.ID) ([]session.Chunk, error) {
	return g.of(ctx).Transcript(ctx, id)
}

func (g tenantGraph) CommonBase(ctx context.Context, a, b session.ID) (session.ID, bool, error) {
	return g.of(ctx).CommonBase(ctx, a, b)
}

func (g tenantGraph) GetByKey(ctx context.Context, key string) (*session.Version, error) {
	return g.of(ctx).GetByKey(ctx, key)
}

func (g tenantGraph) Children(ctx context.Context, id session.ID) ([]store.Info, error) {
	return g.of(ctx).Children(ctx, id)
}

func (g tenantGraph) Ancestors(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error) {
	return g.of(ctx).Ancestors(ctx, id, maxDepth)
}

func (g tenantGraph) Descendants(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error) {
	return g.of(ctx).Descendants(ctx, id, maxDepth)
}

func (g tenantGraph) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	return g.of(ctx).List(ctx, p)
}

func (g tenantGraph) Bulk(ctx context.Context, fn func(ctx context.Context, tx session.BulkTx) error) error {
	return g.of(ctx).Bulk(ctx, fn)
}

func (g tenantGraph) PutMany(ctx context.Context, vs []*session.Version) error {
	return g.of(ctx).PutMany(ctx, vs)
}

func (g tenantGraph) Tx(ctx context.Context, fn func(ctx context.Context, tx store.TxStore) error) error {
	return g.of(ctx).Tx(ctx, fn)
}

func (g tenantGraph) Verify(ctx context.Context) (store.VerifyReport, error) {
	return g.of(ctx).Verify(ctx)
}

// Migrate and Close act on the coordinator's own store: tenant stores are
// owned by Config.Tenants.
func (g tenantGraph) Migrate(ctx context.Context) error { return g.c.sysGraph.Migrate(ctx) }

func (g tenantGraph) Close() error { return g.c.sysGraph.Close() }
