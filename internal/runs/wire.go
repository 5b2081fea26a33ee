package runs

import (
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// API returns the run as the HTTP API shows it (package api), with its
// steps.
func (r Run) API() api.Run {
	out := api.Run{
		ID: r.ID, Kind: r.Kind, Status: r.Status, Driver: r.Driver, Workflow: r.Workflow,
		Deadline: r.Deadline, Queue: r.Queue, Target: r.Target, Input: r.Input, Budget: r.Budget,
		Output: r.Output, Error: r.Error, ChangesAcceptedAt: r.ChangesAcceptedAt,
		TraceContext: r.TraceContext, Conversation: r.Conversation, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Reviews: r.Reviews,
	}
	if r.Steps != nil {
		out.Steps = make([]api.Step, len(r.Steps))
		for i, st := range r.Steps {
			out.Steps[i] = st.API()
		}
	}
	return out
}

// API returns the step as the HTTP API shows it (package api).
func (s Step) API() api.Step {
	return api.Step{
		ID: s.ID, RunID: s.RunID, Key: s.Key, Ordinal: s.Ordinal, Target: s.Target, Digest: s.Digest, Status: s.Status,
		Input: s.Input, Output: s.Output, Attempts: s.Attempts, Worker: s.Worker, Error: s.Error,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
	}
}

// APIRuns returns runs as the HTTP API shows them (never nil).
func APIRuns(rs []Run) []api.Run {
	out := make([]api.Run, len(rs))
	for i, r := range rs {
		out[i] = r.API()
	}
	return out
}

// Lineage is what a lineage graph needs to know about a run (as the API
// returns it): its input, its output and the inputs of its failed steps.
func Lineage(run api.Run) lineage.RunInfo {
	info := lineage.RunInfo{ID: run.ID, Output: run.Output}
	if run.Input != (session.ID{}) {
		in := run.Input
		info.Input = &in
	}
	for _, st := range run.Steps {
		if st.Status == api.StepFailed {
			info.FailedInputs = append(info.FailedInputs, st.Input)
		}
	}
	return info
}

// SpecPrices returns the prices the run's agent specs declare (their
// `pricing` block), by model, for the dossier's cost column: the run's own
// target and every step's. A target that does not parse, or a spec without
// pricing, adds nothing; when two specs price one model differently, the
// first (the run's, then the steps' in order) wins.
func SpecPrices(run api.Run) map[string]lineage.Price {
	out := map[string]lineage.Price{}
	add := func(raw []byte) {
		if len(raw) == 0 {
			return
		}
		call, err := flow.ParseTarget(raw)
		if err != nil {
			return
		}
		s := call.Agent
		if s.Model == "" || s.Pricing == (agent.Pricing{}) {
			return
		}
		if _, ok := out[s.Model]; !ok {
			out[s.Model] = lineage.Price{Prompt: s.Pricing.InputPerMTok, Completion: s.Pricing.OutputPerMTok}
		}
	}
	add(run.Target)
	for _, st := range run.Steps {
		add(st.Target)
	}
	return out
}
