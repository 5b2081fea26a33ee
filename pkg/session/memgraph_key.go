package session

import (
	"context"
	"fmt"
)

// GetByKey returns the version committed with key, or [ErrNotFound], as the
// stores of package store do.
func (g *MemoryGraph) GetByKey(ctx context.Context, key string) (*Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	v, ok := g.byKey[key]
	if !ok || key == "" {
		return nil, fmt.Errorf("%w: key %q", ErrNotFound, key)
	}
	return v, nil
}
