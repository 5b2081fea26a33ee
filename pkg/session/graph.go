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

// BulkGraph is a [Graph] that commits many versions in one transaction.
// [Import] takes this path when its graph offers it, so an import is all or
// nothing however large it is; the stores implement it, [MemoryGraph] does
// not (Import then checks the whole file before its first Put).
type BulkGraph interface {
	Graph
	// Bulk runs fn in one transaction. The versions fn writes through tx
	// are committed together when fn returns nil, and none of them when fn
	// returns an error, ctx ends or the process dies; Bulk then returns
	// fn's error unchanged. tx must not be used after fn returns.
	Bulk(ctx context.Context, fn func(ctx context.Context, tx BulkTx) error) error
}

// BulkTx writes inside [BulkGraph.Bulk]. It is not safe for concurrent use.
type BulkTx interface {
	// Lookup returns the stored versions (as the transaction sees them,
	// including its own writes) whose id is among ids or whose key is among
	// keys. Only their header fields are set: ID, Hash, Len and Key.
	Lookup(ctx context.Context, ids []ID, keys []string) ([]*Version, error)
	// PutBatch writes vs in order. None of them may be stored yet; each
	// one's parents and base must be stored, written by an earlier
	// PutBatch of this transaction, or earlier in vs. PutBatch checks every
	// version with [VerifyLinks]; an id or key already taken is
	// [ErrConflict]. After an error the transaction can only be rolled back.
	PutBatch(ctx context.Context, vs []*Version) error
}
