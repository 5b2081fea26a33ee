package api

import (
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// SessionRequest is the body of POST /v1/sessions (a new session) and
// POST /v1/sessions/{id}/append: the messages to add, in the order system,
// user, assistant, then Chunks. At least one is required; approval chunks
// are refused (only POST /v1/runs/{id}/approvals records decisions).
type SessionRequest struct {
	User      string          `json:"user,omitempty"`
	System    string          `json:"system,omitempty"`
	Assistant string          `json:"assistant,omitempty"`
	Chunks    []session.Chunk `json:"chunks,omitempty"`
}

// Version is a version as the session endpoints return it (GET
// /v1/sessions/{id}, and the 201 reply of create, append, fork, detach,
// merge, place and import): its metadata and its own chunks (not the
// whole transcript; see [Transcript]).
type Version struct {
	store.Info
	Chunks []session.Chunk `json:"chunks"`
}

// ImportResult is the 201 reply of POST /v1/sessions/import: the imported
// head version.
type ImportResult = Version

// SessionList is the reply of GET /v1/sessions?limit=&after=&roots=&run=:
// versions in commit order and the cursor of the next page ("" on the last).
type SessionList = store.Page

// Transcript is the reply of GET /v1/sessions/{id}/transcript: the full
// transcript of version ID, root first.
type Transcript struct {
	ID     session.ID      `json:"id"`
	Chunks []session.Chunk `json:"chunks"`
}

// Relatives is the reply of GET /v1/sessions/{id}/ancestors and
// …/descendants (?depth=N, 0 for no limit): the versions linked to ID by
// lineage, nearest first.
type Relatives struct {
	ID       session.ID       `json:"id"`
	Versions []store.Relative `json:"versions"`
}

// MergeRequest is the body of POST /v1/sessions/{id}/merge: the version
// whose new chunks are merged into {id}.
type MergeRequest struct {
	Other string `json:"other"`
}

// PlaceRequest is the body of POST /v1/sessions/{id}/place: the placement
// of the new version (backend required; snapshot and spec.handle_id are the
// worker's to set and refused here).
type PlaceRequest = session.Placement

// CommonBase is the reply of GET /v1/versions/{id}/common-base?with=ID:
// the nearest common base of the two versions, null when they share none.
type CommonBase struct {
	Base *session.ID `json:"base"`
}
