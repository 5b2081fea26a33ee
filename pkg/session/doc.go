// Package session provides the Session value: an immutable handle on one
// version of the Session Graph.
//
// # Model
//
// A [Chunk] is one row of a transcript (system, user, assistant, tool_result,
// or one of Rath's evidence kinds). A [Version] is an immutable node of the
// graph: its lineage parents, the chunks it appends to its base, its
// [Placement], cumulative [Usage], the [Op] that made it, who produced it, and
// a sha256 hash over its parents' hashes and its own content.
//
// A version's transcript is its base's transcript followed by its own chunks.
// The base is the first parent for every op except:
//
//   - detach: no parents (a new root), base = the detached version, so the
//     rows are shared rather than copied;
//   - compress: parent = the compressed version, no base (the transcript is
//     the summary alone).
//
// A [Session] pairs a version with the [Graph] that stores it. Every operation
// ([Session.Append], [Session.Fork], [Session.Detach], [Session.Merge],
// [Session.To]) records a new version and returns a new Session; nothing is
// updated in place. Fork writes one small version with no chunks, whatever the
// length of the session.
//
// # Semantics
//
// The operations follow OpenRath 1.2 where it defines them, with Rath's
// additions:
//
//   - fork keeps the parent link, the placement and the workspace snapshot;
//   - detach starts a new root with the same rows;
//   - merge appends the other branch's chunks since the common base of the
//     two transcripts (all of them when there is none), records both parents,
//     keeps the first session's placement and sums usage (the shared prefix
//     is counted once); merging sessions placed on different backends is
//     [ErrIncompatiblePlacement];
//   - usage is cumulative along the transcript: append, fork and detach carry
//     the base's usage, a step adds what its model calls used.
//
// # Graphs
//
// [MemoryGraph] keeps versions in memory; the Postgres and embedded stores in
// package store implement the same [Graph] contract, so code written against
// a Session does not change when the graph moves to a database.
package session
