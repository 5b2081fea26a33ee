-- Memory plane (pkg/memory): items addressed by memory:// URIs per
-- namespace, an inverted index for BM25 recall, per-namespace statistics,
-- and a log of every write and delete. Times are Unix microseconds.
--
-- A delete keeps the item row as a tombstone (deleted_at and the deleting
-- version); its postings leave the index and the statistics.

-- +goose Up
CREATE TABLE memory_items (
    namespace          TEXT    NOT NULL,
    uri                TEXT    NOT NULL,
    text               TEXT    NOT NULL,
    metadata           TEXT    NOT NULL DEFAULT '{}',
    dl                 INTEGER NOT NULL CHECK (dl >= 0),
    version_id         TEXT    NOT NULL DEFAULT '',
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    deleted_at         INTEGER,
    deleted_version_id TEXT,
    PRIMARY KEY (namespace, uri)
) WITHOUT ROWID;

CREATE TABLE memory_postings (
    namespace TEXT    NOT NULL,
    term      TEXT    NOT NULL,
    uri       TEXT    NOT NULL,
    tf        INTEGER NOT NULL CHECK (tf > 0),
    dl        INTEGER NOT NULL,
    PRIMARY KEY (namespace, term, uri)
) WITHOUT ROWID;

CREATE TABLE memory_stats (
    namespace TEXT    PRIMARY KEY,
    docs      INTEGER NOT NULL,
    total_dl  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE memory_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace  TEXT    NOT NULL,
    uri        TEXT    NOT NULL,
    op         TEXT    NOT NULL CHECK (op IN ('remember', 'delete')),
    version_id TEXT    NOT NULL DEFAULT '',
    at         INTEGER NOT NULL
);

-- +goose Down
DROP TABLE memory_log;
DROP TABLE memory_stats;
DROP TABLE memory_postings;
DROP TABLE memory_items;
