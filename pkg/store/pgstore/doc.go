// Package pgstore is the Postgres Session Graph store: a [store.Store] over
// pgx/v5 (a connection pool, pipelined batches, COPY for bulk chunks), with
// the schema applied by goose under its Postgres session lock.
//
// A single-version Put costs one round trip when the parents' headers are
// cached (the insert of version, chunks and edges travels as one pipelined
// batch, which Postgres runs as one implicit transaction); versions with
// more than [CopyThreshold] chunks go through COPY inside a transaction.
package pgstore
