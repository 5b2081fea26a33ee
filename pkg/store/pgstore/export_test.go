package pgstore

// Test hooks for the external tests.

// GroupVersionsSQL and GroupChunksSQL are a commit group's multi-row
// statements, and InsertVersionSQL a commit's own version insert, for the
// plan tests.
const (
	GroupVersionsSQL = groupVersionsSQL
	GroupChunksSQL   = groupChunksSQL
	InsertVersionSQL = insertVersionSQL
)

// GroupQueued returns how many commits wait in s's group queue.
func GroupQueued(s *Store) int {
	g := s.group
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// MaxGroup is the most commits one group takes.
const MaxGroup = maxGroup
