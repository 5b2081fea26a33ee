-- Document frequencies per (namespace, term) for the memory plane, kept
-- with the postings, so recall knows each query term's idf without counting
-- postings, and can skip reading the lists of common terms that cannot
-- change the top k (exact max-score pruning, pkg/memory/internal/sqlmem).
-- No CHECK (df >= 0): an upsert applies negative deltas, and SQLite checks
-- the proposed row before resolving the conflict.

-- +goose Up
CREATE TABLE memory_terms (
    namespace TEXT    NOT NULL,
    term      TEXT    NOT NULL,
    df        INTEGER NOT NULL,
    PRIMARY KEY (namespace, term)
) WITHOUT ROWID;
INSERT INTO memory_terms (namespace, term, df)
SELECT namespace, term, count(*) FROM memory_postings GROUP BY namespace, term;

-- +goose Down
DROP TABLE memory_terms;
