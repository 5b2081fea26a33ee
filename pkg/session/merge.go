package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// Origin names one chunk of the Session Graph wherever it appears: the
// version whose own chunks it was first recorded among, and its index
// there. Two transcript positions hold the same chunk when they have the
// same origin; equal content is not enough (a user can say "yes" twice).
//
// A version's own chunks are new origins, except a merge's: those are
// copies of the other parent's chunks and keep their origins (recorded in
// the merge's [ExtraMergeOrigins] extra). Fork, place and detach add no
// chunks, so their transcripts have their base's origins; a compression's
// summary is a new origin (the compressed transcript is gone from it).
type Origin struct {
	Version ID
	Index   int
}

// String is "version#index".
func (o Origin) String() string { return fmt.Sprintf("%s#%d", o.Version, o.Index) }

// ExtraMergeOrigins is the extra a merge version records when it has own
// chunks: their origins, as runs [version id, first index, count] in
// order, so a later merge knows which chunks this one already brought in
// without walking the other parent again. Its value is part of the merge's
// hash like any extra. Merges recorded before it existed (and imported
// ones) have none; their origins are derived (see [Origins]).
const ExtraMergeOrigins = "merge.origins"

// Origins returns the origin of every position of id's transcript, in
// order (len = the version's Len). It reads versions with g.Get along id's
// base chain, and for a merge without an [ExtraMergeOrigins] extra also its
// other parent's chain:
//
//   - a merge whose own chunks are the last ones of its other parent's
//     transcript (how merges were recorded before origins: "the other's
//     chunks since the common base") has that suffix's origins;
//   - one whose own chunks are those of the other parent that its first
//     parent does not contain, in order, has theirs;
//   - any other merge's chunks are new origins, as any version's are.
func Origins(ctx context.Context, g Reader, id ID) ([]Origin, error) {
	r := newOriginResolver(g)
	return r.origins(ctx, id)
}

// Reader is the read half of a [Graph]: what [Origins] needs.
type Reader interface {
	Get(ctx context.Context, id ID) (*Version, error)
	Transcript(ctx context.Context, id ID) ([]Chunk, error)
}

// originResolver computes origins with a memo, so versions shared by the
// chains it walks during one operation are read once.
type originResolver struct {
	g        Reader
	memo     map[ID][]Origin // each entry full-capacity sliced: append copies
	versions map[ID]*Version
}

func newOriginResolver(g Reader) *originResolver {
	return &originResolver{g: g, memo: make(map[ID][]Origin), versions: make(map[ID]*Version)}
}

func (r *originResolver) origins(ctx context.Context, id ID) ([]Origin, error) {
	if o, ok := r.memo[id]; ok {
		return o, nil
	}
	var chain []*Version // id first, down to a root or a memoized version
	var prefix []Origin
	for cur := id; ; {
		if o, ok := r.memo[cur]; ok {
			prefix = o
			break
		}
		v, err := r.get(ctx, cur)
		if err != nil {
			return nil, fmt.Errorf("origins of %s: %w", id, err)
		}
		chain = append(chain, v)
		if v.Base == nil {
			break
		}
		cur = *v.Base
	}
	out := make([]Origin, len(prefix), max(chain[0].Len, len(prefix)))
	copy(out, prefix)
	for i := len(chain) - 1; i >= 0; i-- {
		v := chain[i]
		own, err := r.own(ctx, v, out)
		if err != nil {
			return nil, err
		}
		out = append(out, own...)
		if len(out) != v.Len {
			return nil, fmt.Errorf("origins of %s: %w: version %s has len %d, its chain holds %d chunks", id, ErrInvalidVersion, v.ID, v.Len, len(out))
		}
		r.memo[v.ID] = out[:len(out):len(out)]
	}
	return r.memo[id], nil
}

// own returns the origins of v's own chunks; before are the origins of its
// base's transcript.
func (r *originResolver) own(ctx context.Context, v *Version, before []Origin) ([]Origin, error) {
	n := len(v.Chunks)
	fresh := func() []Origin {
		out := make([]Origin, n)
		for j := range out {
			out[j] = Origin{Version: v.ID, Index: j}
		}
		return out
	}
	if v.Op != OpMerge || n == 0 {
		return fresh(), nil
	}
	if o, ok := recordedOrigins(v); ok {
		return o, nil
	}
	if len(v.Parents) != 2 || v.Base == nil || *v.Base != v.Parents[0] {
		return fresh(), nil
	}
	other := v.Parents[1]
	ob, err := r.origins(ctx, other)
	if err != nil {
		return nil, fmt.Errorf("origins of merge %s: %w", v.ID, err)
	}
	tb, err := r.g.Transcript(ctx, other)
	if err != nil {
		return nil, fmt.Errorf("origins of merge %s: transcript of %s: %w", v.ID, other, err)
	}
	if len(tb) != len(ob) {
		return nil, fmt.Errorf("origins of merge %s: %w: %s has %d chunks and %d origins", v.ID, ErrInvalidVersion, other, len(tb), len(ob))
	}
	if n <= len(tb) && sameHashes(tb[len(tb)-n:], v.Chunks) {
		return slices.Clone(ob[len(ob)-n:]), nil
	}
	idx := missing(before, ob)
	if len(idx) == n {
		picked := make([]Chunk, n)
		out := make([]Origin, n)
		for j, i := range idx {
			picked[j], out[j] = tb[i], ob[i]
		}
		if sameHashes(picked, v.Chunks) {
			return out, nil
		}
	}
	return fresh(), nil
}

// missing returns the positions of theirs whose origin ours lacks.
func missing(ours, theirs []Origin) []int {
	have := make(map[Origin]bool, len(ours))
	for _, o := range ours {
		have[o] = true
	}
	var out []int
	for i, o := range theirs {
		if !have[o] {
			out = append(out, i)
		}
	}
	return out
}

func sameHashes(a, b []Chunk) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Hash() != b[i].Hash() {
			return false
		}
	}
	return true
}

// recordedOrigins decodes v's [ExtraMergeOrigins] extra. It reports false
// when there is none or it does not describe exactly v's own chunks, and
// the caller then derives them.
func recordedOrigins(v *Version) ([]Origin, bool) {
	for _, e := range v.Extras {
		if e.Key != ExtraMergeOrigins {
			continue
		}
		var runs [][]json.RawMessage
		if err := json.Unmarshal(e.Value, &runs); err != nil {
			return nil, false
		}
		out := make([]Origin, 0, len(v.Chunks))
		for _, run := range runs {
			if len(run) != 3 {
				return nil, false
			}
			var id ID
			var from, count int
			if json.Unmarshal(run[0], &id) != nil || json.Unmarshal(run[1], &from) != nil ||
				json.Unmarshal(run[2], &count) != nil || from < 0 || count <= 0 || count > len(v.Chunks)-len(out) {
				return nil, false
			}
			for j := range count {
				out = append(out, Origin{Version: id, Index: from + j})
			}
		}
		return out, len(out) == len(v.Chunks)
	}
	return nil, false
}

// originsExtra encodes origins as [ExtraMergeOrigins] runs.
func originsExtra(origins []Origin) (Extra, error) {
	var runs [][]any
	for i := 0; i < len(origins); {
		j := i + 1
		for j < len(origins) && origins[j].Version == origins[i].Version && origins[j].Index == origins[j-1].Index+1 {
			j++
		}
		runs = append(runs, []any{origins[i].Version.String(), origins[i].Index, j - i})
		i = j
	}
	raw, err := marshalCanonical(runs)
	if err != nil {
		return Extra{}, fmt.Errorf("encode %s: %w", ExtraMergeOrigins, err)
	}
	return Extra{Key: ExtraMergeOrigins, Value: raw}, nil
}

// mergePlan is what [Session.MergeKeyed] records: the chunks of theirs
// that ours lacks, their origins, and the merged usage.
type mergePlan struct {
	chunks  []Chunk
	origins []Origin
	usage   Usage
}

// mergeMemo is what a chain of merges hands along (a fan-in: acc =
// acc.Merge(branch), again and again): the origins of one version's
// transcript, in order and as a set, and the versions whose cost that
// transcript carries. Without it each merge would walk the whole growing
// chain again, and a fan-in of n branches would cost O(n²) reads.
//
// A memo describes the version id and is held by the Session of that
// version that the merge which made it returned. The next merge of that
// Session takes it (under mu, without waiting), extends it in place and
// hands it to its own result; the old Session's pointer then names another
// version (id) and is ignored. A Session without a usable memo computes
// from the graph, as [Origins] does, so the memo only saves work.
type mergeMemo struct {
	mu      sync.Mutex
	id      ID
	origins []Origin
	has     map[Origin]bool
	carried map[ID]bool
}

// takeMemo returns s's memo locked, when it describes s's version and no
// other merge holds it; else nil.
func (s Session) takeMemo() *mergeMemo {
	m := s.lin
	if m == nil || !m.mu.TryLock() {
		return nil
	}
	if m.id != s.v.ID {
		m.mu.Unlock()
		return nil
	}
	return m
}

// release ends a merge's hold on m: on success (made is the committed
// merge, its origins' tail added) m describes made; otherwise m is spoiled
// (its maps may hold the failed plan's contributors) and nobody uses it.
func (m *mergeMemo) release(made ID, added []Origin, ok bool) {
	if ok {
		m.id = made
		m.origins = append(m.origins, added...)
		for _, o := range added {
			m.has[o] = true
		}
	} else {
		m.id = ID{}
	}
	m.mu.Unlock()
}

// planMerge decides what merging other into s appends: other's chunks
// whose origin s's transcript lacks, in other's order. Usage is s's plus
// the cost of every version that other's transcript stands for and s's
// does not ([originResolver.contributors]), each counted once. It returns
// the memo describing s, locked and extended with the plan's contributors;
// the caller releases it.
func planMerge(ctx context.Context, g Graph, s Session, other *Version) (mergePlan, *mergeMemo, error) {
	r := newOriginResolver(g)
	m := s.takeMemo()
	if m == nil {
		oa, err := r.origins(ctx, s.v.ID)
		if err != nil {
			return mergePlan{}, nil, err
		}
		m = &mergeMemo{id: s.v.ID, origins: slices.Clip(oa), has: make(map[Origin]bool, len(oa)), carried: make(map[ID]bool)}
		m.mu.Lock()
		for _, o := range oa {
			m.has[o] = true
		}
		if _, err := r.contributors(ctx, oa, m.carried); err != nil {
			m.release(ID{}, nil, false)
			return mergePlan{}, nil, err
		}
	}
	p, err := m.plan(ctx, r, g, s.v, other)
	if err != nil {
		m.release(ID{}, nil, false)
		return mergePlan{}, nil, err
	}
	return p, m, nil
}

// plan is planMerge's work once m describes s.
func (m *mergeMemo) plan(ctx context.Context, r *originResolver, g Graph, s, other *Version) (mergePlan, error) {
	ob, err := r.origins(ctx, other.ID)
	if err != nil {
		return mergePlan{}, err
	}
	var idx []int
	for i, o := range ob {
		if !m.has[o] {
			idx = append(idx, i)
		}
	}
	p := mergePlan{usage: s.Usage}
	if len(idx) == 0 {
		return p, nil
	}
	theirs, err := g.Transcript(ctx, other.ID)
	if err != nil {
		return mergePlan{}, fmt.Errorf("transcript of %s: %w", other.ID, err)
	}
	if len(theirs) != len(ob) {
		return mergePlan{}, fmt.Errorf("%w: %s has %d chunks and %d origins", ErrInvalidVersion, other.ID, len(theirs), len(ob))
	}
	for _, i := range idx {
		p.chunks = append(p.chunks, theirs[i])
		p.origins = append(p.origins, ob[i])
	}
	added, err := r.contributors(ctx, p.origins, m.carried)
	if err != nil {
		return mergePlan{}, err
	}
	for _, w := range added {
		c, err := r.cost(ctx, w)
		if err != nil {
			return mergePlan{}, err
		}
		p.usage = p.usage.Add(c)
	}
	return p, nil
}

// contributors adds to seen, and returns in order, the versions whose
// cost a transcript with these origins carries and seen lacks: each
// origin's version, and for a compression's summary the contributors of
// the transcript it compressed (the summary stands for it).
func (r *originResolver) contributors(ctx context.Context, origins []Origin, seen map[ID]bool) ([]ID, error) {
	var out []ID
	for _, o := range origins {
		if seen[o.Version] {
			continue
		}
		seen[o.Version] = true
		out = append(out, o.Version)
		v, err := r.get(ctx, o.Version)
		if err != nil {
			return nil, err
		}
		if v.Op == OpCompress && v.Base == nil && len(v.Parents) == 1 {
			po, err := r.origins(ctx, v.Parents[0])
			if err != nil {
				return nil, err
			}
			more, err := r.contributors(ctx, po, seen)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
	}
	return out, nil
}

// cost is what version id added to the usage of the transcript it
// extends: its base's, or for a compression its parent's (the compressed
// history is counted through its own versions), or nothing for a root.
func (r *originResolver) cost(ctx context.Context, id ID) (Usage, error) {
	v, err := r.get(ctx, id)
	if err != nil {
		return Usage{}, err
	}
	from := v.Base
	if from == nil && v.Op == OpCompress && len(v.Parents) == 1 {
		from = &v.Parents[0]
	}
	if from == nil {
		return v.Usage, nil
	}
	b, err := r.get(ctx, *from)
	if err != nil {
		return Usage{}, err
	}
	return v.Usage.Sub(b.Usage), nil
}

// get reads a version once per resolver.
func (r *originResolver) get(ctx context.Context, id ID) (*Version, error) {
	if v, ok := r.versions[id]; ok {
		return v, nil
	}
	v, err := r.g.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", id, err)
	}
	r.versions[id] = v
	return v, nil
}
