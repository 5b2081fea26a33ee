package session

import (
	"context"
	"fmt"
	"sync"
)

// MemoryGraph is a [Graph] held in memory: what a Session uses before it is
// given a store, and the model the stores are checked against. The zero value
// is not usable; call [NewMemoryGraph].
type MemoryGraph struct {
	mu       sync.RWMutex // guards following
	versions map[ID]*Version
	byKey    map[string]*Version
	order    []ID // insertion order
}

// NewMemoryGraph returns an empty in-memory graph.
func NewMemoryGraph() *MemoryGraph {
	return &MemoryGraph{versions: make(map[ID]*Version), byKey: make(map[string]*Version)}
}

// Put implements [Graph].
func (g *MemoryGraph) Put(ctx context.Context, v *Version) (*Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if v.Key != "" {
		if got, ok := g.byKey[v.Key]; ok {
			return KeyedReplay(got, v)
		}
	}
	if got, ok := g.versions[v.ID]; ok {
		if got.Hash == v.Hash {
			return got, nil
		}
		return nil, fmt.Errorf("%w: id %s already holds a different version", ErrConflict, v.ID)
	}
	parents := make([]*Version, len(v.Parents))
	for i, id := range v.Parents {
		parents[i] = g.versions[id]
		if parents[i] == nil {
			return nil, fmt.Errorf("%w: parent %s of %s", ErrNotFound, id, v.ID)
		}
	}
	var base *Version
	if v.Base != nil {
		if base = g.versions[*v.Base]; base == nil {
			return nil, fmt.Errorf("%w: base %s of %s", ErrNotFound, *v.Base, v.ID)
		}
	}
	if err := VerifyLinks(v, parents, base); err != nil {
		return nil, err
	}
	g.versions[v.ID] = v
	if v.Key != "" {
		g.byKey[v.Key] = v
	}
	g.order = append(g.order, v.ID)
	return v, nil
}

// Get implements [Graph].
func (g *MemoryGraph) Get(ctx context.Context, id ID) (*Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	v, ok := g.versions[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return v, nil
}

// Transcript implements [Graph].
func (g *MemoryGraph) Transcript(ctx context.Context, id ID) ([]Chunk, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	v, ok := g.versions[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	out := make([]Chunk, v.Len)
	end := v.Len
	for cur := v; cur != nil; {
		end -= len(cur.Chunks)
		copy(out[end:], cur.Chunks)
		if cur.Base == nil {
			break
		}
		cur = g.versions[*cur.Base]
	}
	return out, nil
}

// CommonBase implements [Graph].
func (g *MemoryGraph) CommonBase(ctx context.Context, a, b ID) (ID, bool, error) {
	if err := ctx.Err(); err != nil {
		return ID{}, false, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	onA := make(map[ID]bool)
	for id, ok := a, true; ok; id, ok = g.baseOf(id) {
		onA[id] = true
	}
	if _, ok := g.versions[b]; !ok {
		return ID{}, false, fmt.Errorf("%w: %s", ErrNotFound, b)
	}
	for id, ok := b, true; ok; id, ok = g.baseOf(id) {
		if onA[id] {
			return id, true, nil
		}
	}
	return ID{}, false, nil
}

func (g *MemoryGraph) baseOf(id ID) (ID, bool) {
	v := g.versions[id]
	if v == nil || v.Base == nil {
		return ID{}, false
	}
	return *v.Base, true
}

// Versions returns every version in the order they were put.
func (g *MemoryGraph) Versions() []*Version {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]*Version, len(g.order))
	for i, id := range g.order {
		out[i] = g.versions[id]
	}
	return out
}
