package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/pgmem"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
)

// MemoryPath returns where the memory store of an embedded store URL
// lives: memory.db beside the store's file (so .rath/memory.db under
// rathctl dev), or ":memory:" for an in-memory store; "" for other URLs.
func MemoryPath(storeURL string) string {
	p, ok := strings.CutPrefix(storeURL, "sqlite:")
	if !ok {
		return ""
	}
	p = strings.TrimPrefix(p, "//")
	if p == ":memory:" {
		return p
	}
	return sqlitemem.DefaultPath(filepath.Dir(p))
}

// openMemory opens the memory store beside the session store: its own
// SQLite file for an embedded store (migrated on open), the same Postgres
// database otherwise (whose migrations the coordinator applies), there as
// an [auth.MemoryRouter]: calls acting for a version go to its tenant's
// confined store, others to the system store.
func openMemory(ctx context.Context, storeURL string) (memory.Store, error) {
	if p := MemoryPath(storeURL); p != "" {
		st, err := sqlitemem.Open(ctx, p)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	pool, err := pgxpool.New(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("open memory store: %w", err)
	}
	// Workers serve every tenant: a step's memory goes to its run's
	// tenant's confined store (docs/security.md, "Memory").
	pools, err := auth.NewTenantPools(storeURL, 2)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open memory store: %w", err)
	}
	return &auth.MemoryRouter{System: pgmem.New(pool), Pools: pools}, nil
}

// EmbeddingMemory wraps st in embedding recall ([memory.Semantic]) when
// getenv names an embedding model in RATH_EMBEDDING_MODEL; the endpoint is
// the one [llm.ResolveEmbedder] finds (RATH_EMBEDDING_PROVIDER names a
// config file entry; else OPENAI_BASE_URL / OPENAI_API_KEY and the rest of
// the chat resolution). Unset, st is returned as it is (BM25). A model
// named but not resolvable is an error naming the variable; an endpoint
// that fails later only makes recall fall back to BM25 with a warning.
func EmbeddingMemory(st memory.Store, getenv func(string) string) (memory.Store, error) {
	model := getenv("RATH_EMBEDDING_MODEL")
	if st == nil || model == "" {
		return st, nil
	}
	cache, ok := st.(memory.VectorCache)
	if !ok {
		return nil, fmt.Errorf("RATH_EMBEDDING_MODEL: the memory store %T cannot cache vectors", st)
	}
	e, err := llm.ResolveEmbedder(llm.ProviderSpec{Name: getenv("RATH_EMBEDDING_PROVIDER")}, model, getenv)
	if err != nil {
		return nil, fmt.Errorf("RATH_EMBEDDING_MODEL %q: %w", model, err)
	}
	return &memory.Semantic{Store: st, Embedder: e, Cache: cache}, nil
}
