// Package trainset turns the Session Graph into training data: one JSONL
// record per trajectory, in the OpenAI fine-tuning chat format or in an
// OpenRath trajectory format, each record carrying the provenance of the
// version it came from (id, hash, run, agent, model, usage), so every
// example can be traced back and its hash rechecked (`rathctl verify ID`).
//
// # Selection
//
// [Export] pages through a [Source] (a store, or a coordinator's tenant
// graph) in commit order and keeps the versions [Selector] matches: a run,
// an agent, a creation-time range. Of those it exports the trajectories'
// ends only: a selected version is skipped when one of its children that
// the selector also matches extends it (has it as its base), so a run that
// appended ten steps to one session yields one record, and a run that forked
// a session into three branches yields three. A version whose
// model-facing transcript does not end with an assistant message is not a
// supervised example and is skipped (counted in [Stats.Skipped]).
//
// # Redaction
//
// A redacted chunk is never exported. [DropRecord] (the default) skips the
// whole record; [DropChunk] drops the chunk, and when it is a tool result
// also the tool call it answers, so the record stays well formed.
//
// # Streaming and resuming
//
// Export holds one page of version headers and one transcript at a time:
// memory does not grow with the number of versions exported. Every record
// carries a cursor; passing it as [Options.After] resumes the export just
// after that record.
//
// # Preference pairs
//
// [Pairs] writes DPO pairs from sibling branches that share a prompt and
// that something ranked apart: a person's label ([FromLabels], `rathctl
// label`), a rollout verifier's score ([FromScores], a [Label] by
// [VerifierBy]) or approval decisions on the branches' tool calls
// ([FromApproval]). Each pair names its [PairSource].
package trainset
