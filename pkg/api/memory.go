package api

import "github.com/rath-run/rath/pkg/memory"

// MemoryItem is one memory item (a tombstone when DeletedAt is set).
type MemoryItem = memory.Item

// MemoryHit is one recall result.
type MemoryHit = memory.Hit

// MemoryList is the reply of GET /v1/memory/items.
type MemoryList struct {
	Items []MemoryItem `json:"items"`
}

// RememberRequest is the body of POST /v1/memory/items: write (or
// rewrite) an item.
type RememberRequest struct {
	Namespace string            `json:"namespace"`
	URI       string            `json:"uri"`
	Text      string            `json:"text"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	// VersionID, when set, is recorded as the writer: a session version of
	// the caller's tenant.
	VersionID string `json:"version_id,omitempty"`
}

// RecallRequest is the body of POST /v1/memory/recall.
type RecallRequest struct {
	Namespace string `json:"namespace"`
	Text      string `json:"text"`
	TopK      int    `json:"top_k,omitempty"`
	Scope     string `json:"scope,omitempty"`
}

// RecallReply is the reply of POST /v1/memory/recall.
type RecallReply struct {
	Hits []MemoryHit `json:"hits"`
}

// MemoryDeleteReply is the reply of DELETE /v1/memory/item
// (?namespace=&uri=&version=): the item is gone, a tombstone stays.
type MemoryDeleteReply struct {
	Namespace string `json:"namespace"`
	Deleted   string `json:"deleted"`
}

// MemoryCommitRequest is the body of POST /v1/memory/commit: archive a
// session version's transcript into memory
// (memory://session/ID/transcript, written by that version).
type MemoryCommitRequest struct {
	Namespace string `json:"namespace,omitempty"`
	// Version is the session version whose transcript is archived; it must
	// be the caller's tenant's.
	Version string `json:"version"`
	// Agent is recorded in the item's metadata (default: the version's
	// producer).
	Agent string `json:"agent,omitempty"`
}

// MemoryCommitReply is the reply of POST /v1/memory/commit.
type MemoryCommitReply struct {
	Transcript MemoryItem   `json:"transcript"`
	Memos      []MemoryItem `json:"memos,omitempty"`
	Warning    string       `json:"warning,omitempty"`
}
