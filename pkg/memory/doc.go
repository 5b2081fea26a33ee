// Package memory is Rath's memory plane: items that persist across runs,
// addressed by OpenRath-style URIs (memory://user|agent|session|resources/…),
// kept per namespace (tenant, agent or user), and recalled by BM25.
//
// # Contracts
//
//   - A [URI] names one item: memory://<scope>/<segment>/…, with scope one of
//     user, agent, session, resources and at least one segment; empty, "."
//     and ".." segments, an unknown scope or another scheme are refused with
//     an [*Error] of kind [KindInvalidURI], as OpenRath's invalid_uri.
//   - Every [Item] records the session version that wrote it
//     ([Item.VersionID]), so lineage reaches into memory.
//   - Delete is recorded: the item stays as a tombstone row (DeletedAt,
//     DeletedVersionID) and leaves recall and list; remembering the URI
//     again revives it.
//   - Recall ranks with OpenRath's BM25 ([Tokenize], k1 = 1.5, b = 0.75,
//     idf = ln(1 + (N − n + 0.5)/(n + 0.5)), its evaluation order), so the
//     same notes and query give OpenRath's scores bit for bit. Documents
//     that score zero still fill the top k, and ties keep URI order
//     (OpenRath's sorted corpus walk).
//   - Items over [MaxTextBytes] or metadata over [MaxMetadataBytes] are
//     refused with the limit named ([KindTooLarge]).
//
// Backends: [github.com/rath-run/rath/pkg/memory/sqlitemem] (embedded, for
// rathctl dev) and [github.com/rath-run/rath/pkg/memory/pgmem] (the
// cluster). Both keep an inverted index (term → item, tf, document length)
// and per-namespace statistics, so recall reads the postings of the query's
// terms instead of scanning every item. They share one conformance suite,
// [github.com/rath-run/rath/pkg/memory/memorytest].
package memory
