package coordinator

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/replay"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/flowfile"
	"github.com/rath-run/rath/pkg/llm"
)

// rerunRun serves POST /v1/runs/{id}/rerun: a new workflow run that
// re-executes the coordinator-driven workflow run id from its step keyed
// req.From with live models, keeping as committed the steps that step's
// input descends from (replay.KeptSteps: reused, not re-executed). The
// rerun's workflow is the original's with req.Model and req.Agents applied
// (replay.OverrideWorkflow); it accepts changes from the start, so the
// kept steps stand even where a changed model gives them another digest.
// The original run and its versions are untouched; the answer is the new
// run (201), which this coordinator drives like a submitted one. Both
// runs are the request's tenant's.
func (c *Coordinator) rerunRun(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var req api.RunRerunRequest
	if !c.decode(w, r, &req) {
		return
	}
	if req.From == "" {
		c.fail(w, r, badRequest("from: required: the key of the step to rerun from"))
		return
	}
	if req.Model != "" {
		if err := llm.ValidateModel(req.Model); err != nil {
			c.fail(w, r, badRequest("model: %v", err))
			return
		}
	}
	sc := c.scopeOf(ctx)
	orig, err := sc.Runs.Get(ctx, r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if orig.Kind != runs.KindWorkflow || orig.Driver != runs.DriverCoordinator || orig.Workflow == "" {
		c.fail(w, r, badRequest("run %s is not a workflow file this coordinator drives: rerun --run reruns those (rerun VERSION --from ANCESTOR reruns a path of agent steps)", orig.ID))
		return
	}
	kept, err := replay.KeptSteps(ctx, sc.Graph, orig, req.From)
	if err != nil {
		c.failRerun(w, r, err)
		return
	}
	text, err := replay.OverrideWorkflow(orig.Workflow, req.Model, req.Agents)
	if err != nil {
		c.failRerun(w, r, err)
		return
	}
	f, err := flowfile.Parse("workflow", []byte(text), nil)
	if err == nil {
		_, err = f.Build()
	}
	if err != nil {
		c.fail(w, r, badRequest("the rerun's workflow: %v", err))
		return
	}
	nr := runs.Run{ID: runs.NewRunID(), Kind: runs.KindWorkflow, Driver: runs.DriverCoordinator, Workflow: text,
		Queue: orig.Queue, Target: orig.Target, Input: orig.Input, Budget: orig.Budget}
	if err := sc.Runs.CreateRerun(ctx, &nr, kept); err != nil {
		c.fail(w, r, fmt.Errorf("record rerun: %w", err))
		return
	}
	c.submitted(ctx, bus.Event{RunID: nr.ID, Data: mustJSON(map[string]any{
		"input": nr.Input, "driver": nr.Driver, "rerun_of": orig.ID, "from": req.From, "kept": len(kept), "model": req.Model,
	})})
	c.driver.kick()
	c.cfg.Metrics.RunSubmitted()
	writeJSON(w, http.StatusCreated, nr.API())
}

// failRerun answers a replay.ErrBadRerun as 400, anything else as itself.
func (c *Coordinator) failRerun(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, replay.ErrBadRerun) {
		err = badRequest("%v", err)
	}
	c.fail(w, r, err)
}
