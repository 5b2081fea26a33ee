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
//   - merge appends the chunks of the other transcript that the first does
//     not already contain (see Merge below), records both parents, keeps
//     the first session's placement and counts each version's usage once;
//     merging sessions placed on different backends is
//     [ErrIncompatiblePlacement];
//   - usage is cumulative along the transcript: append, fork and detach carry
//     the base's usage, a step adds what its model calls used.
//
// # Merge
//
// a.Merge(b) appends to a's transcript exactly the chunks of b's transcript
// that a's does not already contain, in b's order. "Contain" follows
// lineage, not content: every chunk has an [Origin], the version that first
// recorded it (an append, a step, a create, a compression's summary) and
// its index there. Fork, place and detach add no chunks, so they pass
// their base's origins on; a merge's own chunks keep the origins they had
// in b (it records them in its [ExtraMergeOrigins] extra). Two equal texts
// appended by two versions are two chunks, and both are kept.
//
// In the pictures, "root → A1" means A1 was appended to a fork of root;
// transcripts are listed after "=".
//
// Fork point. The chunks before the fork are the same chunks on both
// sides, so only what each branch appended is new to the other:
//
//	root ─┬─ A1                 merge(A, B) = root,A1,B1,B2
//	      └─ B1,B2              merge(B, A) = root,B1,B2,A1
//
// Fork of a fork. The nearer shared history counts too:
//
//	root ── X1 ─┬─ P1           merge(P, Q) = root,X1,P1,Q1
//	            └─ (fork) ─ Q1
//
// Merge of a merge (issue 21's reproduction). What an earlier merge
// brought in is not taken again:
//
//	root ─┬─ A1 ─────── M ─ M2  M  = merge(A, B)  = root,A1,B1,B2
//	      └─ B1,B2 ─┴── B3 ─┘   M2 = merge(M, B3) = root,A1,B1,B2,B3
//
// (before origins, M2 was root,A1,B1,B2,B1,B2,B3: the common base was found
// along first parents only.)
//
// Criss-cross. Each side merged the other before going on; the final
// merge takes only the other side's newest chunks:
//
//	root ─┬─ X1 ──┬─ P = merge(X, Y) ─ p    P' = root,X1,Y1,p
//	      └─ Y1 ──┴─ Q = merge(Y, X) ─ q    Q' = root,Y1,X1,q
//	                                        merge(P', Q') = root,X1,Y1,p,q
//
// Detach. A detached session is a new root whose rows are the detached
// version's: the same chunks, with the same origins:
//
//	root ─┬─ A1 ─── M = merge(A, B) = root,A1,B1,B2
//	      └─ B1,B2 ┘
//	           └── (detach) ─ D1    merge(M, D) = root,A1,B1,B2,D1
//
// Compress in between. A compression's summary is a new chunk (the
// compressed transcript is gone from its transcript), so merging it brings
// the summary and what followed it:
//
//	root ─┬─ A1 ─── M = merge(A, B) = root,A1,B1,B2
//	      └─ B1,B2 ┘
//	           └── compress ─ S ─ C1   merge(M, C) = root,A1,B1,B2,S,C1
//	                                   merge(C, M) = S,C1,root,A1,B1,B2
//
// It follows that merging a version with a copy of itself (a fork or a
// detach) or with one of its lineage ancestors (not behind a compression)
// adds nothing, merging the same two versions twice gives the same
// transcript, and no merge holds a chunk twice unless one of its sides
// did. Merging a session with itself is [ErrInvalidVersion].
//
// Usage follows the same rule: a merge's usage is a's plus the cost (what
// it added to its base's usage) of every version whose chunks b's
// transcript holds and a's does not, each counted once. A summary stands
// for the transcript it compressed, so merging one also counts the
// compressed versions, once. A version that adds usage without adding
// chunks (no operation of Rath's does) is counted along its own chain only.
//
// Merges recorded before origins existed carry no [ExtraMergeOrigins];
// [Origins] derives theirs (their chunks were the other parent's last
// ones), so old graphs keep their hashes and merge correctly onward.
//
// # Graphs
//
// [MemoryGraph] keeps versions in memory; the Postgres and embedded stores in
// package store implement the same [Graph] contract, so code written against
// a Session does not change when the graph moves to a database.
package session
