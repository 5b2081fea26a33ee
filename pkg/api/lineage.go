package api

import (
	"encoding/json"
	"fmt"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// VerifyReport is the answer of GET /v1/sessions/{id}/verify (one version
// and everything it descends from) and GET /v1/verify (every version of
// the caller's tenant): the hash chain recomputed from the stored rows.
type VerifyReport struct {
	// OK is true when at least one version was checked and nothing was
	// wrong. A check of zero versions is not OK: it could not have failed
	// (an empty tenant, or the wrong store or server).
	OK bool `json:"ok"`
	// ID is the version checked with its ancestry; empty for a whole-tenant
	// verify.
	ID       string `json:"id,omitempty"`
	Versions int    `json:"versions"`
	Chunks   int    `json:"chunks"`
	// Edges is the lineage links checked (whole-tenant verify only).
	Edges int `json:"edges,omitempty"`
	// Problems names each row that does not verify: table, id (and ord for
	// a chunk) and column. Never null.
	Problems []string `json:"problems"`
}

// Finish sets OK from the counts and problems and makes Problems non-nil.
func (r *VerifyReport) Finish() {
	if r.Problems == nil {
		r.Problems = []string{}
	}
	r.OK = len(r.Problems) == 0 && r.Versions > 0
}

// Summary is the report's one-line verdict, e.g. "verified 3 versions, 7
// chunks: ok"; a check of zero versions says it checked nothing.
func (r VerifyReport) Summary() string {
	switch {
	case len(r.Problems) > 0:
		return fmt.Sprintf("verified %d versions, %d chunks: %d problem(s)", r.Versions, r.Chunks, len(r.Problems))
	case r.Versions == 0:
		return "verified 0 versions, 0 chunks: nothing was checked (an empty store or tenant, or not the store or server you meant)"
	}
	return fmt.Sprintf("verified %d versions, %d chunks: ok", r.Versions, r.Chunks)
}

// Dossier is the evidence of one run, the answer of
// GET /v1/runs/{id}/dossier?format=json (format md or html streams the
// rendered document instead).
type Dossier = lineage.Dossier

// Dossier formats (?format=).
const (
	DossierJSON     = "json"
	DossierMarkdown = "md"
	DossierHTML     = "html"
)

// ReplayRequest is the body of POST /v1/versions/{id}/replay.
type ReplayRequest struct {
	// Strict commits nothing when the replay diverges from the recording.
	Strict bool `json:"strict,omitempty"`
}

// ReplayReport is the answer of POST /v1/versions/{id}/replay: the agent
// step that made Of re-executed with its recorded model replies and tool
// results (no model called, no tool run), and the hashes compared.
type ReplayReport struct {
	// Of is the replayed step version; Replay the new version (op replay,
	// parent the step's input), absent when a strict replay diverged.
	Of     session.ID  `json:"of"`
	Replay *session.ID `json:"replay,omitempty"`
	// Identical says every chunk hash (and so the transcript) came out the
	// same; Divergences lists where not (never null).
	Identical   bool     `json:"identical"`
	Chunks      int      `json:"chunks"`
	Divergences []string `json:"divergences"`
}

// RunReplayRequest is the body of POST /v1/runs/{id}/replay.
type RunReplayRequest struct {
	// Strict stops the replay at the first difference (the report's
	// Diverged names it).
	Strict bool `json:"strict,omitempty"`
}

// RunReplayReport is the answer of POST /v1/runs/{id}/replay: every step of
// a workflow run re-executed from its recording (no model called, no tool
// run) into a new replay branch, in the order the steps were recorded, and
// each step's chunk hashes compared with the recorded ones.
type RunReplayReport struct {
	Run string `json:"run"`
	// Output is the run's recorded output; Replay is its replay, the head
	// of the replay branch (absent when the run recorded no output or a
	// strict replay stopped).
	Output *session.ID `json:"output,omitempty"`
	Replay *session.ID `json:"replay,omitempty"`
	// Identical says every step (and merge) came out with the recorded
	// chunk hashes.
	Identical bool `json:"identical"`
	// Diverged names the first difference: "step KEY (KIND): round R:
	// message M …"; empty when Identical.
	Diverged string `json:"diverged,omitempty"`
	// Steps are the replayed steps and fan-in merges in replay order
	// (never null).
	Steps []RunReplayRow `json:"steps"`
}

// RunReplayRow is one replayed step (or fan-in merge) of a whole-run
// replay.
type RunReplayRow struct {
	// Key is the step's key (a merge's version key); Kind is agent,
	// select, compress or merge.
	Key      string      `json:"key"`
	Kind     string      `json:"kind"`
	Original session.ID  `json:"original"`
	Replay   *session.ID `json:"replay,omitempty"`
	// Identical says the replay appended the recorded chunks, hash for
	// hash; Divergences lists where not (never null).
	Identical   bool     `json:"identical"`
	Chunks      int      `json:"chunks"`
	Divergences []string `json:"divergences"`
}

// RunRerunRequest is the body of POST /v1/runs/{id}/rerun: rerun a
// coordinator-driven workflow run from its step keyed From, with live
// models, as a new run.
type RunRerunRequest struct {
	// From is the key of the step to rerun from (runs show lists them).
	From string `json:"from"`
	// Model, when set, replaces every agent's model in the rerun's
	// workflow (its script is dropped unless Model is "scripted").
	Model string `json:"model,omitempty"`
	// Agents replaces the named agents of the workflow with these specs
	// (JSON agent specs, package agent).
	Agents map[string]json.RawMessage `json:"agents,omitempty"`
}

// Rerun actions, as reported per version of the path (RerunRow.Action).
const (
	RerunAppended = "appended"
	RerunRan      = "ran"
	RerunSkipped  = "skipped"
)

// RerunRow is one version of the path from the ancestor to the version
// and what rerun did with it.
type RerunRow struct {
	Original session.ID `json:"original"`
	Op       session.Op `json:"op"`
	Action   string     `json:"action"`
	// New is the version rerun made for it on the new branch; absent when
	// the version was skipped (a fork or a placement).
	New *session.ID `json:"new,omitempty"`
	// Run is the new run that re-executed a step.
	Run   string `json:"run,omitempty"`
	Agent string `json:"agent,omitempty"`
	Model string `json:"model,omitempty"`
}

// RerunReport is what a rerun did (`rathctl rerun -o json`).
type RerunReport struct {
	Version session.ID `json:"version"`
	From    session.ID `json:"from"`
	// Fork is the new branch's first version (op fork, parent From); Head
	// its last, the rerun's answer to Version.
	Fork  session.ID `json:"fork"`
	Head  session.ID `json:"head"`
	Steps []RerunRow `json:"steps"`
}
