package cli

import (
	"context"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flowfile"
)

// fileKind tells a workflow file from an agent spec file by its top-level
// keys: a workflow has steps (an agent spec never does).
func fileKind(path string) (workflow bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("run file: %w", err)
	}
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return false, fmt.Errorf("%s: not a YAML or JSON mapping: %w", path, err)
	}
	_, steps := top["steps"]
	return steps, nil
}

// workflowRun is what `rathctl run FILE` submits for a workflow file.
type workflowRun struct {
	path, message, session, queue, timeout string
	budget                                 runs.Budget
}

// submitWorkflowFile validates a workflow file here (errors name its lines),
// makes it self-contained (agent files and scripts inlined) and submits it
// for the coordinator to drive.
func submitWorkflowFile(ctx context.Context, cl *client.Client, w workflowRun) (runs.Run, error) {
	f, err := flowfile.Load(w.path)
	if err != nil {
		return runs.Run{}, &exitError{code: 2, err: err}
	}
	if _, err := f.Build(); err != nil {
		return runs.Run{}, &exitError{code: 2, err: fmt.Errorf("%s: %w", w.path, err)}
	}
	doc, err := selfContained(w.path, f)
	if err != nil {
		return runs.Run{}, err
	}
	body := map[string]any{"workflow": string(doc)}
	for k, v := range map[string]string{"message": w.message, "session": w.session, "queue": w.queue, "timeout": w.timeout} {
		if v != "" {
			body[k] = v
		}
	}
	if !w.budget.IsZero() {
		body["budget"] = w.budget
	}
	var r runs.Run
	if err := cl.Do(ctx, "POST", "/v1/runs", body, &r); err != nil {
		return runs.Run{}, err
	}
	return r, nil
}

// selfContained returns the workflow file to submit: the file itself when
// it needs nothing beside it (no agent or script files), so the lines the
// coordinator names in its refusals (a sandbox block outside the
// operator's policy) are the file's own, else f encoded with every agent
// inline.
func selfContained(path string, f *flowfile.File) ([]byte, error) {
	if data, err := os.ReadFile(path); err == nil {
		if _, err := flowfile.Parse(path, data, nil); err == nil {
			return data, nil
		}
	}
	return f.Encode()
}
