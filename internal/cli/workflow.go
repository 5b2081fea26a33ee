package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rath-run/rath/pkg/api"
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
	budget                                 api.Budget
}

// submitWorkflowFile validates a workflow file here (errors name its lines),
// makes it self-contained (agent files and scripts inlined) and submits it
// for the coordinator to drive.
func submitWorkflowFile(ctx context.Context, cl *client.Client, w workflowRun) (api.Run, error) {
	f, err := flowfile.Load(w.path)
	if err != nil {
		return api.Run{}, &exitError{code: 2, err: err}
	}
	if _, err := f.Build(); err != nil {
		return api.Run{}, &exitError{code: 2, err: fmt.Errorf("%s: %w", w.path, err)}
	}
	doc, asIs, err := selfContained(w.path, f)
	if err != nil {
		return api.Run{}, err
	}
	r, err := cl.SubmitWorkflow(ctx, api.SubmitRequest{Workflow: string(doc), Message: w.message, Session: w.session,
		Queue: w.queue, Timeout: w.timeout, Budget: w.budget})
	if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		// The coordinator refused the file (an agent's tool no worker
		// offers, a sandbox outside the policy): bad input, exit 2. Its
		// positions are the file's own when the file went as it is.
		msg := strings.TrimPrefix(ae.Message, "bad request: ")
		if rest, ok := strings.CutPrefix(msg, "workflow: workflow:"); ok && asIs {
			return api.Run{}, &exitError{code: 2, err: fmt.Errorf("%s:%s", w.path, rest)}
		}
		return api.Run{}, &exitError{code: 2, err: fmt.Errorf("%s: %w", w.path, err)}
	}
	return r, err
}

// selfContained returns the workflow file to submit: the file itself when
// it needs nothing beside it (no agent or script files), so the lines the
// coordinator names in its refusals (a sandbox block outside the
// operator's policy) are the file's own, else f encoded with every agent
// inline.
func selfContained(path string, f *flowfile.File) (doc []byte, asIs bool, err error) {
	if data, err := os.ReadFile(path); err == nil {
		if _, err := flowfile.Parse(path, data, nil); err == nil {
			return data, true, nil
		}
	}
	doc, err = f.Encode()
	return doc, false, err
}
