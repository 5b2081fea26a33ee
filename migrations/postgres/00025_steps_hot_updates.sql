-- A step's row is rewritten several times in its life: its start, every
-- heartbeat of the worker running it, its commit (or failure). The index
-- steps_open_idx (00003) was on updated_at, with status in its predicate,
-- and both change at every one of those rewrites, so none of them could be
-- a HOT update: each added an entry to every index of steps (its key, its
-- run's, and this one), which vacuum then had to remove (issue 25: about
-- six of the 37 index entries a step's statements wrote).
--
-- Without it no index of steps covers a column a rewrite changes, and
-- Postgres rewrites the row in place on its page. Its one reader, the
-- reconciler's search for stale steps (runs.Store.Stale), finds the open
-- steps through the open runs instead (the open runs by index, then
-- steps_run_idx): a step of a run that has ended has nothing left to
-- recover.

-- +goose Up
DROP INDEX steps_open_idx;

-- +goose Down
CREATE INDEX steps_open_idx ON steps (updated_at) WHERE status IN ('pending', 'running');
