package session

import "context"

// Graph stores versions. It is the seam between the Session value and the
// stores: [MemoryGraph] in this package, Postgres and the embedded SQLite
// store in package store. Implementations must be safe for concurrent use,
// must never modify a Version they were given or returned, and must
// translate their failures into this package's sentinel errors.
type Graph interface {
	// Put commits v and its chunks atomically and returns the committed
	// version. v's parents and base must already be in the graph and v.Hash
	// must verify against them ([ErrHashMismatch] otherwise). If v.Key is set
	// and a version with that key exists, Put commits nothing and returns the
	// existing version: retried commits are no-ops.
	Put(ctx context.Context, v *Version) (*Version, error)
	// Get returns the version with the given id, or [ErrNotFound].
	Get(ctx context.Context, id ID) (*Version, error)
	// Transcript returns the version's full transcript: its base's transcript
	// followed by its own chunks. The result must not be modified.
	Transcript(ctx context.Context, id ID) ([]Chunk, error)
	// CommonBase returns the nearest version whose transcript is a prefix of
	// both a's and b's transcripts (the lowest common ancestor along base
	// links), and false when they share none.
	CommonBase(ctx context.Context, a, b ID) (ID, bool, error)
}
