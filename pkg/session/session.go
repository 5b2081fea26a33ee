package session

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Session is an immutable handle on one version of a [Graph]. Its methods
// never change it: each operation records a new version and returns a new
// Session. The zero Session is invalid; get one from [New],
// [FromUserMessage], [FromAgentPrompt] or [Open].
//
// A Session is a small value (a graph and a version pointer); copy it freely.
type Session struct {
	g Graph
	v *Version
	// lin is set on a merge's result: what the next merge of this
	// Session may reuse instead of walking v's chain again (mergeMemo).
	lin *mergeMemo
}

// Open returns a handle on the stored version id.
func Open(ctx context.Context, g Graph, id ID) (Session, error) {
	v, err := g.Get(ctx, id)
	if err != nil {
		return Session{}, fmt.Errorf("open session %s: %w", id, err)
	}
	return Session{g: g, v: v}, nil
}

// Wrap returns a handle on v, which must already be in g.
func Wrap(g Graph, v *Version) Session { return Session{g: g, v: v} }

// New records a root version holding chunks (op create) and returns it.
func New(ctx context.Context, g Graph, chunks ...Chunk) (Session, error) {
	return commit(ctx, g, &Version{Op: OpCreate, Chunks: slices.Clone(chunks)}, nil, nil)
}

// Root returns a sealed root version holding chunks (op create), as New
// would commit it, without committing it: for a caller that commits it
// with rows of its own in one transaction.
func Root(chunks ...Chunk) (*Version, error) {
	v := &Version{Op: OpCreate, Chunks: slices.Clone(chunks), ID: NewID(), CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := Seal(v, nil, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", v.Op, err)
	}
	return v, nil
}

// FromUserMessage records a root session holding one user chunk.
func FromUserMessage(ctx context.Context, g Graph, text string) (Session, error) {
	return New(ctx, g, User(text))
}

// FromAgentPrompt records a root session holding one system chunk: an agent's
// instructions.
func FromAgentPrompt(ctx context.Context, g Graph, text string) (Session, error) {
	return New(ctx, g, System(text))
}

// Graph returns the graph the session lives in.
func (s Session) Graph() Graph { return s.g }

// Version returns the session's version. It must not be modified.
func (s Session) Version() *Version { return s.v }

// ID returns the version id.
func (s Session) ID() ID { return s.v.ID }

// Op returns the operation that made the version.
func (s Session) Op() Op { return s.v.Op }

// Parents returns a copy of the version's lineage parents.
func (s Session) Parents() []ID { return slices.Clone(s.v.Parents) }

// Usage returns the cumulative token usage.
func (s Session) Usage() Usage { return s.v.Usage }

// Placement returns where the session's tools run.
func (s Session) Placement() Placement { return s.v.Placement }

// Len returns the number of chunks in the full transcript, without loading it.
func (s Session) Len() int { return s.v.Len }

// Hash returns the version hash.
func (s Session) Hash() string { return s.v.Hash }

// IsZero reports whether s is the zero Session.
func (s Session) IsZero() bool { return s.v == nil }

// String is a short form for logs: "Session(id op, n chunks)".
func (s Session) String() string {
	if s.v == nil {
		return "Session(nil)"
	}
	return fmt.Sprintf("Session(%s %s, %d chunks)", s.v.ID, s.v.Op, s.v.Len)
}

// Chunks returns the full transcript. The slice must not be modified.
func (s Session) Chunks(ctx context.Context) ([]Chunk, error) {
	cs, err := s.g.Transcript(ctx, s.v.ID)
	if err != nil {
		return nil, fmt.Errorf("load transcript of %s: %w", s.v.ID, err)
	}
	return cs, nil
}

// Append records a version (op append) that adds chunks to the transcript.
func (s Session) Append(ctx context.Context, chunks ...Chunk) (Session, error) {
	return s.Extend(ctx, Extension{Op: OpAppend, Chunks: chunks})
}

// Extension describes a version that extends a session's transcript: an
// append, or a step recorded by a worker.
type Extension struct {
	// Op is OpAppend when empty.
	Op     Op
	Chunks []Chunk
	// Usage is what producing the chunks used; the new version's usage is
	// the session's plus this.
	Usage    Usage
	Producer Producer
	// Placement replaces the session's placement when non-nil (a step that
	// snapshots its workspace records the new snapshot here).
	Placement *Placement
	Extras    []Extra
	// Key makes the commit idempotent (a step id).
	Key string
}

// Extend records a version that appends e.Chunks to s (first parent and base
// s). If e.Key was committed before, the committed version is returned.
func (s Session) Extend(ctx context.Context, e Extension) (Session, error) {
	op := e.Op
	if op == "" {
		op = OpAppend
	}
	place := s.v.Placement
	if e.Placement != nil {
		place = *e.Placement
	}
	v := &Version{
		Parents:   []ID{s.v.ID},
		Base:      idPtr(s.v.ID),
		Op:        op,
		Chunks:    slices.Clone(e.Chunks),
		Placement: place,
		Usage:     s.v.Usage.Add(e.Usage),
		Producer:  e.Producer,
		Extras:    slices.Clone(e.Extras),
		Key:       e.Key,
	}
	return commit(ctx, s.g, v, []*Version{s.v}, s.v)
}

// Fork records a version with s as its only parent and no chunks of its own:
// the same transcript, placement, workspace and usage, in one small row.
func (s Session) Fork(ctx context.Context) (Session, error) {
	v := &Version{
		Parents:   []ID{s.v.ID},
		Base:      idPtr(s.v.ID),
		Op:        OpFork,
		Placement: s.v.Placement,
		Usage:     s.v.Usage,
	}
	return commit(ctx, s.g, v, []*Version{s.v}, s.v)
}

// Detach records a new root (no parents) with the same transcript, placement
// and usage. The rows are shared through the base link, not copied.
func (s Session) Detach(ctx context.Context) (Session, error) {
	v := &Version{
		Base:      idPtr(s.v.ID),
		Op:        OpDetach,
		Placement: s.v.Placement,
		Usage:     s.v.Usage,
	}
	return commit(ctx, s.g, v, nil, s.v)
}

// To records a version placed on p (op place): the same transcript, now
// bound to another sandbox backend or spec. An empty p.Snapshot keeps the
// current workspace snapshot, so files travel with the move.
func (s Session) To(ctx context.Context, p Placement) (Session, error) {
	return s.ToKeyed(ctx, p, "")
}

// ToKeyed is [Session.To] with an idempotency key: if a version with key
// was committed before as the same move, it is returned and nothing is
// recorded. A workflow step that places its input again on re-execution
// (a durable run's driver after a restart) gets the same version back.
func (s Session) ToKeyed(ctx context.Context, p Placement, key string) (Session, error) {
	if p.Snapshot == "" {
		p.Snapshot = s.v.Placement.Snapshot
	}
	v := &Version{
		Parents:   []ID{s.v.ID},
		Base:      idPtr(s.v.ID),
		Op:        OpPlace,
		Placement: p,
		Usage:     s.v.Usage,
		Key:       key,
	}
	return commit(ctx, s.g, v, []*Version{s.v}, s.v)
}

// Merge records a version with parents (s, other) whose transcript is s's
// followed by the chunks of other's transcript that s's does not already
// contain, in other's order. "Contain" follows lineage, not content: a
// chunk is the same chunk when it has the same [Origin], whichever forks,
// merges and detaches carried it (see "Merge" in the package
// documentation for the cases). The new version records the taken chunks'
// origins ([ExtraMergeOrigins]). It keeps s's placement; its usage is s's
// plus what the versions that first recorded the taken chunks added, each
// counted once. Merging s with itself is [ErrInvalidVersion]; sessions
// placed on different backends cannot merge ([ErrIncompatiblePlacement]).
func (s Session) Merge(ctx context.Context, other Session) (Session, error) {
	return s.MergeKeyed(ctx, other, "")
}

// MergeKeyed is [Session.Merge] with an idempotency key: if a version with
// key was committed before, it is returned and nothing is recorded. A
// workflow that merges the same two versions again on re-execution (a
// durable run's fan-in) gets the same merge back.
func (s Session) MergeKeyed(ctx context.Context, other Session, key string) (Session, error) {
	if other.v == nil {
		return Session{}, fmt.Errorf("merge %s: other session is zero", s.v.ID)
	}
	if s.g != other.g {
		return Session{}, fmt.Errorf("merge %s with %s: %w", s.v.ID, other.v.ID, ErrDifferentGraph)
	}
	if a, b := s.v.Placement.Backend, other.v.Placement.Backend; a != "" && b != "" && a != b {
		return Session{}, fmt.Errorf("merge %s (%s) with %s (%s): %w", s.v.ID, a, other.v.ID, b, ErrIncompatiblePlacement)
	}
	if s.v.ID == other.v.ID {
		return Session{}, fmt.Errorf("merge %s with itself: %w", s.v.ID, ErrInvalidVersion)
	}
	p, memo, err := planMerge(ctx, s.g, s, other.v)
	if err != nil {
		return Session{}, fmt.Errorf("merge %s with %s: %w", s.v.ID, other.v.ID, err)
	}
	var extras []Extra
	if len(p.origins) > 0 {
		e, err := originsExtra(p.origins)
		if err != nil {
			memo.release(ID{}, nil, false)
			return Session{}, fmt.Errorf("merge %s with %s: %w", s.v.ID, other.v.ID, err)
		}
		extras = []Extra{e}
	}
	v := &Version{
		Parents:   []ID{s.v.ID, other.v.ID},
		Base:      idPtr(s.v.ID),
		Op:        OpMerge,
		Chunks:    p.chunks,
		Placement: s.v.Placement,
		Usage:     p.usage,
		Extras:    extras,
		Key:       key,
	}
	res, err := commit(ctx, s.g, v, []*Version{s.v, other.v}, s.v)
	// A keyed merge committed before returns that version: the memo
	// describes the plan made now, so it is dropped then.
	made := err == nil && res.v.ID == v.ID
	memo.release(v.ID, p.origins, made)
	if made {
		res.lin = memo
	}
	return res, err
}

// commit fills in id, time, length and hash, then puts v into g.
func commit(ctx context.Context, g Graph, v *Version, parents []*Version, base *Version) (Session, error) {
	if v.ID == (ID{}) {
		v.ID = NewID()
	}
	if v.CreatedAt.IsZero() {
		v.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
	}
	if err := Seal(v, parents, base); err != nil {
		return Session{}, fmt.Errorf("%s: %w", v.Op, err)
	}
	got, err := g.Put(ctx, v)
	if err != nil {
		return Session{}, fmt.Errorf("%s: commit %s: %w", v.Op, v.ID, err)
	}
	return Session{g: g, v: got}, nil
}

func idPtr(id ID) *ID { return &id }
