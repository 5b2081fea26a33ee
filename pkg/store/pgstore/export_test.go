package pgstore

import "time"

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

// SetStall sets how long commits queue behind s's group in flight before
// they go as a further group (StallAfter by default).
func SetStall(s *Store, d time.Duration) {
	g := s.group
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stall = d
}
