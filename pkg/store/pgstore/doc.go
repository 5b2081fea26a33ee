// Package pgstore is the Postgres Session Graph store: a [store.Store] over
// pgx/v5 (a connection pool, pipelined batches, COPY for bulk chunks), with
// the schema applied by goose under its Postgres session lock.
//
// A single-version Put costs one round trip when the parents' headers are
// cached (the insert of version, chunks and edges travels as one pipelined
// batch, which Postgres runs as one implicit transaction); versions with
// more than [CopyThreshold] chunks go through COPY inside a transaction.
// The insert statement itself claims the next position of the base's lane
// (see package store); when a concurrent commit took it first, the unique
// violation is caught and the version is written again in a lane of its own.
//
// Transcripts and lineage walks are read from the rows' raw wire values
// (kinds interned, payloads copied into an arena, lineage rows decoded from
// the binary format), so a 10,000-chunk load allocates a few dozen times.
package pgstore
