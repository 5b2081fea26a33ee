-- Memory plane (pkg/memory): items addressed by memory:// URIs per
-- namespace, an inverted index for BM25 recall, per-namespace statistics,
-- and a log of every write and delete. Times are Unix microseconds, as in
-- the embedded store, so one SQL implementation serves both.
--
-- A delete keeps the item row as a tombstone (deleted_at and the deleting
-- version); its postings leave the index and the statistics.

-- +goose Up
CREATE TABLE memory_items (
    namespace          text    NOT NULL,
    uri                text    COLLATE "C" NOT NULL,
    text               text    NOT NULL,
    metadata           text    NOT NULL DEFAULT '{}',
    dl                 integer NOT NULL CHECK (dl >= 0),
    version_id         text    NOT NULL DEFAULT '',
    created_at         bigint  NOT NULL,
    updated_at         bigint  NOT NULL,
    deleted_at         bigint,
    deleted_version_id text,
    PRIMARY KEY (namespace, uri)
);

CREATE TABLE memory_postings (
    namespace text    NOT NULL,
    term      text    NOT NULL,
    uri       text    COLLATE "C" NOT NULL,
    tf        integer NOT NULL CHECK (tf > 0),
    dl        integer NOT NULL,
    PRIMARY KEY (namespace, term, uri)
);

CREATE TABLE memory_stats (
    namespace text   PRIMARY KEY,
    docs      bigint NOT NULL,
    total_dl  bigint NOT NULL
);

CREATE TABLE memory_log (
    seq        bigserial PRIMARY KEY,
    namespace  text   NOT NULL,
    uri        text   NOT NULL,
    op         text   NOT NULL CHECK (op IN ('remember', 'delete')),
    version_id text   NOT NULL DEFAULT '',
    at         bigint NOT NULL
);

-- +goose Down
DROP TABLE memory_log;
DROP TABLE memory_stats;
DROP TABLE memory_postings;
DROP TABLE memory_items;
