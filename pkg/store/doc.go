// Package store is the contract of the Session Graph stores: the Postgres
// store (package pgstore) and the embedded SQLite store (package sqlitestore)
// both implement [Store] and pass the conformance suite in package storetest.
// Package storeurl opens either from a URL.
//
// # The seam
//
// [Store] is wide and is implemented only by this module: it is the one seam
// between the runtime and its database, not an extension point. Code above it
// should declare the small interface it needs (often just [session.Graph])
// where it uses it.
//
// # Contract
//
//   - Put commits a version, its own chunks and its lineage edges in one
//     transaction, after checking it with [session.VerifyLinks] against the
//     stored parents and base. A version whose Key was committed before is not
//     written again: Put returns the committed one. Reusing an id for
//     different content is [session.ErrConflict].
//   - Fork, place and detach versions write one version row (plus one edge
//     for fork and place) and no chunk rows, whatever the transcript length.
//   - Versions carry stored positions, lanes (migration 00005): a lane is
//     a run of versions each extending the one before it (its base and
//     first parent); a version records its lane and position, and its
//     chunks are stored under its lane. A version joins its base's lane when
//     the next position is free, else starts its own (a branch).
//   - Transcript loads a version's full transcript with one query that
//     takes one step per lane of the base chain (not per version) and reads
//     each lane's chunks as one index range; it never walks rows one by one
//     in Go. Versions and transcripts are immutable, so both are cached in
//     process (bounded LRU). CommonBase walks lanes the same way.
//   - Ancestors and Descendants follow lineage edges (all parents, merges
//     included); Depth is the length of the shortest path, results are
//     nearest first, ties broken by commit order (newest first for
//     ancestors, oldest first for descendants). Ancestors walks lanes,
//     leaving one only at its start and at merges.
//   - Verify also checks the lanes: they are derived from hashed fields but
//     not hashed themselves.
//   - Rows are append-only: the database refuses UPDATE and DELETE on
//     versions, chunks and lineage (triggers).
//   - Failures are translated into the sentinel errors of package session:
//     [session.ErrNotFound], [session.ErrConflict], [session.ErrInvalidID],
//     [session.ErrUnavailable] (the database cannot be reached; retry),
//     [session.ErrHashMismatch] (from [Store.Verify]). A driver error never
//     reaches the caller unwrapped.
//
// Stores are safe for concurrent use.
package store
