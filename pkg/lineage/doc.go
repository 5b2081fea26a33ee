// Package lineage answers questions about the Session Graph: where a
// version came from (ancestors, the path between two versions, their common
// ancestor), who produced each chunk of a transcript ([Blame]), how two
// versions differ ([Diff]), and what a session or a run looks like as a
// picture ([Graph], rendered as DOT, Mermaid, SVG, JSON or OpenRath's
// lineage JSONL).
//
// # Contract
//
// Everything here reads through [Source], the small part of a store it
// needs; it never writes. Versions are immutable, so results computed from
// a version never go stale: only graphs built from "everything below a root"
// or "everything a run made" grow as new versions are committed.
//
// Blame attributes each chunk of a transcript to the version that first
// stored it. A merge stores the other branch's chunks again as its own
// (with the same hashes); blame follows them back to the branch version
// that produced them and records the merge in Entry.Via. A compress
// version's summary is attributed to the compress version itself.
//
// Graph nodes carry a status: the run's output and the versions it
// descends from are "output"/"ok"; a branch no later merge or output
// reaches is "rejected" when an output is known (the route not taken), and
// a version that was the input of a failed step is "failed". Edges are the
// lineage parent links, typed by the child's op (fork, merge, compress,
// step, append, place, replay, redact, import), plus a dashed "detach" link
// from a detached root to the version whose rows it shares.
//
// The SVG renderer lays graphs out itself (longest-path layering from the
// roots down, barycentre ordering within layers) with no external program
// and no cgo.
package lineage
