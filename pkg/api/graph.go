package api

import (
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// Graph is the JSON reply (format=json, the default) of GET
// /v1/sessions/{id}/graph?format=&depth= and GET /v1/runs/{id}/graph: nodes
// (versions) and edges (lineage links), as pkg/lineage builds them. The
// other formats (svg, dot, mermaid, openrath-jsonl) are documents of their
// own content type ([lineage.Format.ContentType]).
type Graph = lineage.Graph

// GraphFormat is a value of the graph endpoints' ?format=.
type GraphFormat = lineage.Format

// Blame is the reply of GET /v1/sessions/{id}/blame: who produced each
// chunk of version ID's transcript, in transcript order.
type Blame struct {
	ID     session.ID      `json:"id"`
	Chunks []lineage.Entry `json:"chunks"`
}
