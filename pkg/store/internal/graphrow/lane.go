package graphrow

import (
	"cmp"
	"slices"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Lanes are stored positions (migration 00005): a lane is a run of versions
// each extending the one before it, which is both its base and its first
// parent. A version's lane is the id of the version that started it and its
// pos the position in it (0 for the start); a version's chunks are stored
// under its lane. Within a lane, (lane, pos) and (lane, ord) are unique, so a
// transcript is one index range per lane and an ancestor walk takes one step
// per lane and merge rather than one per version.

// LanePos is a version's place in its lane.
type LanePos struct {
	Lane session.ID
	Pos  int
}

// ExtendsBase reports whether v may join its base's lane: its base is also
// its first parent.
func ExtendsBase(v *session.Version) bool {
	return v.Base != nil && len(v.Parents) > 0 && v.Parents[0] == *v.Base
}

// BatchLanes assigns lanes to vs, committed together in this order: a
// version joins the lane of a base earlier in vs when the next position is
// still free; any other version (a root, a branch, or one whose base is
// already stored) starts its own lane.
func BatchLanes(vs []*session.Version) []LanePos {
	out := make([]LanePos, len(vs))
	at := make(map[session.ID]int, len(vs))
	taken := make(map[LanePos]bool, len(vs))
	for i, v := range vs {
		out[i] = LanePos{Lane: v.ID}
		if ExtendsBase(v) {
			if j, ok := at[*v.Base]; ok {
				next := LanePos{Lane: out[j].Lane, Pos: out[j].Pos + 1}
				if !taken[next] {
					out[i] = next
				}
			}
		}
		taken[out[i]] = true
		at[v.ID] = i
	}
	return out
}

// BulkLanes assigns lanes across the batches of one bulk transaction (an
// import): a version joins its base's lane when that lane was started in
// this transaction and the next position is still free; any other version
// starts its own lane. Lanes of versions stored before the transaction are
// never joined, so concurrent commits extending the same base cannot race
// the bulk write for a position. It keeps one entry per lane started.
type BulkLanes struct {
	tip map[session.ID]int // lane started in this transaction -> highest position taken
}

// NewBulkLanes returns an empty BulkLanes.
func NewBulkLanes() *BulkLanes { return &BulkLanes{tip: make(map[session.ID]int)} }

// Assign returns the lanes of vs, written next in this order. stored holds
// the lanes of the bases vs extends that were written by earlier batches
// (bases stored before the transaction may be absent: they are not
// joined).
func (b *BulkLanes) Assign(vs []*session.Version, stored map[session.ID]LanePos) []LanePos {
	out := make([]LanePos, len(vs))
	at := make(map[session.ID]int, len(vs))
	for i, v := range vs {
		out[i] = LanePos{Lane: v.ID}
		if ExtendsBase(v) {
			base, ok := stored[*v.Base]
			if j, in := at[*v.Base]; in {
				base, ok = out[j], true
			}
			if tip, started := b.tip[base.Lane]; ok && started && tip == base.Pos {
				out[i] = LanePos{Lane: base.Lane, Pos: base.Pos + 1}
			}
		}
		b.tip[out[i].Lane] = out[i].Pos
		at[v.ID] = i
	}
	return out
}

// CheckLane checks v's stored lane against the lanes already checked (fed in
// commit order) and the lanes of its chunk rows, recording problems.
func (c *Checker) CheckLane(v *session.Version, lp LanePos, chunkLanes []session.ID) {
	if c.lanes == nil {
		c.lanes = make(map[session.ID]LanePos)
	}
	c.lanes[v.ID] = lp
	switch {
	case lp.Pos == 0 && lp.Lane != v.ID:
		c.problem("version %s: starts lane %s, which is not its own id", v.ID, lp.Lane)
	case lp.Pos > 0 && !ExtendsBase(v):
		c.problem("version %s: at lane position %d but does not extend its first parent", v.ID, lp.Pos)
	case lp.Pos > 0:
		if b, ok := c.lanes[*v.Base]; !ok || b.Lane != lp.Lane || b.Pos != lp.Pos-1 {
			c.problem("version %s: lane %s position %d does not follow its base %s", v.ID, lp.Lane, lp.Pos, *v.Base)
		}
	}
	for i, l := range chunkLanes {
		if l != lp.Lane {
			c.problem("version %s: chunk %d in lane %s, want %s", v.ID, i, l, lp.Lane)
			break
		}
	}
}

// Problem records a problem found outside the checks above (a lane column
// that does not parse, say).
func (c *Checker) Problem(format string, args ...any) { c.problem(format, args...) }

// Reached is a version a lineage walk reached, before each version keeps
// its shortest depth.
type Reached struct {
	store.Relative
	Seq int64
}

// Nearest keeps each version's shortest depth and orders the result nearest
// first, ties by commit order (newest first when newestFirst, as ancestors
// are listed). unique says the walk cannot have reached a version twice (it
// entered one lane once), which skips the deduplication. The walks return
// rows unaggregated because grouping in Go is cheaper than in SQLite; rows
// usually come farthest first, so they are reversed before the (then
// mostly skipped) sort.
func Nearest(rs []Reached, newestFirst, unique bool) []store.Relative {
	kept := rs
	if !unique {
		best := make(map[session.ID]int, len(rs))
		kept = rs[:0:0]
		for _, r := range rs {
			if i, ok := best[r.ID]; ok {
				if r.Depth < kept[i].Depth {
					kept[i] = r
				}
				continue
			}
			best[r.ID] = len(kept)
			kept = append(kept, r)
		}
	}
	slices.Reverse(kept)
	order := func(a, b Reached) int {
		if c := cmp.Compare(a.Depth, b.Depth); c != 0 {
			return c
		}
		if newestFirst {
			return cmp.Compare(b.Seq, a.Seq)
		}
		return cmp.Compare(a.Seq, b.Seq)
	}
	if !slices.IsSortedFunc(kept, order) {
		slices.SortFunc(kept, order)
	}
	out := make([]store.Relative, len(kept))
	for i, r := range kept {
		out[i] = r.Relative
	}
	return out
}
