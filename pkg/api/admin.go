package api

import (
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// GCRequest is the body of POST /v1/admin/gc: delete the caller's tenant's
// versions nothing keeps (not pinned, no run's or step's input or output,
// no memory item's writer, no ancestor of a kept version) that are older
// than Keep.
type GCRequest struct {
	// Keep is the horizon as a Go duration ("720h"): versions newer than
	// it always stay. Required, positive.
	Keep string `json:"keep"`
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// GCReport is the reply of POST /v1/admin/gc: what was (or, on a dry run,
// would be) freed.
type GCReport = lineage.GCReport

// PinRequest is the (optional) body of POST /v1/versions/{id}/pin.
type PinRequest struct {
	// Note says why the version is kept; pinning a pinned version replaces
	// its note.
	Note string `json:"note,omitempty"`
}

// Pin is one pinned version.
type Pin = lineage.Pin

// PinReply is the reply of POST /v1/versions/{id}/pin and DELETE
// /v1/versions/{id}/pin.
type PinReply struct {
	ID     session.ID `json:"id"`
	Pinned bool       `json:"pinned"`
	Note   string     `json:"note,omitempty"`
}

// PinList is the reply of GET /v1/pins: the tenant's pinned versions,
// oldest pin first.
type PinList struct {
	Pins []Pin `json:"pins"`
}

// RedactRequest is the body of POST /v1/versions/{id}/redact.
type RedactRequest struct {
	// Chunk is the chunk's ord in the version's transcript, from 0.
	Chunk int `json:"chunk"`
	// Reason is recorded with the redaction. Required.
	Reason string `json:"reason"`
}

// Redaction is one recorded redaction of one chunk row.
type Redaction = lineage.Redaction

// RedactionProblem is a chunk row holding a redaction marker no redaction
// recorded.
type RedactionProblem = lineage.Problem

// RedactReply is the reply of POST /v1/versions/{id}/redact: every chunk
// row the redaction erased (a merge stores copies).
type RedactReply struct {
	Redactions []Redaction `json:"redactions"`
}

// RedactionList is the reply of GET /v1/redactions: the tenant's recorded
// redactions, oldest first, and the markers no redaction recorded.
type RedactionList struct {
	Redactions []Redaction        `json:"redactions"`
	Problems   []RedactionProblem `json:"problems"`
}

// CheckRequest is the body of POST /v1/admin/check.
type CheckRequest struct {
	// Settled also requires every run and step to have ended.
	Settled bool `json:"settled,omitempty"`
}

// CheckProblem is one violated invariant of the Session Graph.
type CheckProblem struct {
	Invariant string `json:"invariant"`
	// Row names the offending rows (table and id).
	Row    string `json:"row"`
	Detail string `json:"detail"`
}

// CheckReport is the reply of POST /v1/admin/check: what the invariant
// checker scanned (the caller's tenant's rows) and what it found.
type CheckReport struct {
	Versions int `json:"versions"`
	Chunks   int `json:"chunks"`
	Edges    int `json:"edges"`
	Runs     int `json:"runs"`
	Steps    int `json:"steps"`
	// Open counts steps still pending, running or waiting.
	Open     int            `json:"open_steps"`
	Problems []CheckProblem `json:"problems"`
}

// OK reports whether no invariant is violated.
func (r CheckReport) OK() bool { return len(r.Problems) == 0 }
