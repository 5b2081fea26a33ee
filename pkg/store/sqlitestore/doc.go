// Package sqlitestore is the embedded Session Graph store: a [store.Store]
// over SQLite through modernc.org/sqlite (pure Go, no cgo), for
// `rathctl dev` and tests that need no server.
//
// A file database runs in WAL mode with a busy timeout and foreign keys on.
// All writes go through one connection (SQLite has one writer; serializing
// them in process avoids SQLITE_BUSY between our own connections), each
// write transaction taking the lock up front (BEGIN IMMEDIATE); reads use a
// small pool of read-only connections and never block on the writer. An
// in-memory database (":memory:") uses a single connection for both.
//
// Write transactions that queue for the writer share commits (group
// commit, groupcommit.go): a transaction that ends while others wait
// releases a savepoint and leaves the SQLite transaction to the next,
// and the last of the group commits it for all. A transaction's Commit
// returns only after that commit, with its outcome: the group commits or
// fails as one, and a member that rolls back undoes only its own work.
// Statements inside a write transaction are not interrupted by their
// context (an interrupted write would roll the whole group back); a
// context still ends the wait for the writer, and the transaction ends at
// its next statement. When SQLite rolls a whole transaction back after an
// error in it (a full disk, INSERT OR ROLLBACK), the rest of that
// transaction's statements are refused rather than run outside any
// transaction, and its Commit fails. [Store.DB] is such a handle.
//
// The chunks table is keyed by (lane, ord) (see package store), so a lane's
// chunks are one sequential range. Transcripts and ancestor lists come back
// from SQLite packed in one value rather than a row per chunk or version:
// the driver's per-row cost, not SQLite's, dominated long reads.
package sqlitestore
