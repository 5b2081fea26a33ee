package lineage

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Source is what this package reads: a subset of [store.Store] (both stores
// implement it).
type Source interface {
	Get(ctx context.Context, id session.ID) (*session.Version, error)
	Transcript(ctx context.Context, id session.ID) ([]session.Chunk, error)
	CommonBase(ctx context.Context, a, b session.ID) (session.ID, bool, error)
	Ancestors(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error)
	Descendants(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error)
	List(ctx context.Context, p store.ListParams) (store.Page, error)
}

// ErrNoPath means two versions share no lineage ancestor.
var ErrNoPath = errors.New("rath: versions share no lineage ancestor")

// maxWalk bounds the versions Path visits, so a malformed or enormous graph
// cannot make it run without end.
const maxWalk = 1_000_000

// CommonAncestor returns the lineage ancestor of both a and b (either may be
// the other's ancestor, or a == b) with the shortest total distance to the
// two, ties broken by the newer version. ok is false when they share none.
// It takes one Ancestors query per version.
func CommonAncestor(ctx context.Context, src Source, a, b session.ID) (id session.ID, ok bool, err error) {
	da, err := depths(ctx, src, a)
	if err != nil {
		return id, false, err
	}
	db, err := depths(ctx, src, b)
	if err != nil {
		return id, false, err
	}
	best := -1
	var bestSeq int64
	for x, ra := range da {
		rb, in := db[x]
		if !in {
			continue
		}
		d := ra.depth + rb.depth
		if best < 0 || d < best || (d == best && ra.order > bestSeq) {
			best, bestSeq, id = d, ra.order, x
		}
	}
	return id, best >= 0, nil
}

type reach struct {
	depth int
	// order grows with creation time (UUIDv7 ids sort by time); it breaks
	// ties between equally distant ancestors.
	order int64
}

// depths maps id and every ancestor of it to their distance from id.
func depths(ctx context.Context, src Source, id session.ID) (map[session.ID]reach, error) {
	v, err := src.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("lineage: version %s: %w", id, err)
	}
	rel, err := src.Ancestors(ctx, id, 0)
	if err != nil {
		return nil, fmt.Errorf("lineage: ancestors of %s: %w", id, err)
	}
	out := make(map[session.ID]reach, len(rel)+1)
	out[id] = reach{0, v.CreatedAt.UnixNano()}
	for _, r := range rel {
		out[r.ID] = reach{r.Depth, r.CreatedAt.UnixNano()}
	}
	return out, nil
}

// Path returns a shortest lineage path between from and to: from, its
// ancestors up to their common ancestor, then down to to. When from is an
// ancestor of to it is the chain of versions from from to to, both
// included. It is [ErrNoPath] when the two share no ancestor.
func Path(ctx context.Context, src Source, from, to session.ID) ([]session.ID, error) {
	ca, ok, err := CommonAncestor(ctx, src, from, to)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s and %s", ErrNoPath, from, to)
	}
	up, err := climb(ctx, src, from, ca)
	if err != nil {
		return nil, err
	}
	down, err := climb(ctx, src, to, ca)
	if err != nil {
		return nil, err
	}
	// up runs from → ca; down runs to → ca: reverse it and drop ca.
	slices.Reverse(down)
	return append(up, down[1:]...), nil
}

// climb returns a shortest parent chain from id up to anc (both included),
// searching breadth first.
func climb(ctx context.Context, src Source, id, anc session.ID) ([]session.ID, error) {
	prev := map[session.ID]session.ID{id: id}
	queue := []session.ID{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == anc {
			var out []session.ID
			for x := cur; ; x = prev[x] {
				out = append(out, x)
				if x == id {
					break
				}
			}
			slices.Reverse(out)
			return out, nil
		}
		if len(prev) > maxWalk {
			return nil, fmt.Errorf("lineage: path from %s visits more than %d versions", id, maxWalk)
		}
		v, err := src.Get(ctx, cur)
		if err != nil {
			return nil, fmt.Errorf("lineage: version %s: %w", cur, err)
		}
		for _, p := range v.Parents {
			if _, seen := prev[p]; !seen {
				prev[p] = cur
				queue = append(queue, p)
			}
		}
	}
	return nil, fmt.Errorf("%w: %s does not descend from %s", ErrNoPath, id, anc)
}
