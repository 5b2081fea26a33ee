package api

import (
	"encoding/json"
	"time"
)

// ExportTrajectoriesRequest is the body of POST /v1/export/trajectories:
// which versions to export and how (docs/training-data.md). The reply is
// application/x-ndjson, one record per line, streamed as it is made; an
// error after the first record ends the stream and is reported in the
// [TrailerExportError] trailer, and the [TrailerExportStats] trailer
// carries the export's counts as JSON. There is no SQL filter over the
// lineage views here, by design: it would run a caller's SQL against a
// shared database (rathctl --store offers --where on a store directly).
type ExportTrajectoriesRequest struct {
	Run   string    `json:"run,omitempty"`
	Agent string    `json:"agent,omitempty"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Format is "openai" (the default) or "openrath".
	Format string `json:"format,omitempty"`
	// Redacted is "drop-record" (the default) or "drop-chunk".
	Redacted string `json:"redacted,omitempty"`
	// After is a record's provenance cursor: resume after that record.
	After string `json:"after,omitempty"`
	// Tools are OpenAI tool schemas written into every OpenAI record.
	Tools []json.RawMessage `json:"tools,omitempty"`
}

// Trailers of the export streams.
const (
	TrailerExportError = "Rath-Export-Error"
	TrailerExportStats = "Rath-Export-Stats"
)

// ExportPairsRequest is the body of POST /v1/export/pairs: DPO preference
// pairs from labeled sibling branches (docs/training-data.md), streamed
// as application/x-ndjson with the same trailers as the trajectories
// export (the stats are a trainset.PairStats).
type ExportPairsRequest struct {
	Run   string    `json:"run,omitempty"`
	Agent string    `json:"agent,omitempty"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Redacted is "drop-record" (the default) or "drop-chunk".
	Redacted string `json:"redacted,omitempty"`
	// From are the decisions pairs are made from: "labels" (a person's
	// rathctl label), "scores" (a rollout verifier's), "approval"
	// (approved over rejected tool calls), "selector" (a rollout
	// selector's choice); empty is all four.
	From []string `json:"from,omitempty"`
}
