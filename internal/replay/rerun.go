package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/session"
)

// ErrBadRerun marks a rerun request that cannot be honored: a run that is
// not a coordinator-driven workflow, an unknown step, an override naming
// no agent of the workflow.
var ErrBadRerun = errors.New("bad rerun")

// maxKeptWalk bounds the versions [KeptSteps] walks back from a step's
// input.
const maxKeptWalk = 1_000_000

// maxClockSkew is how much older than its run (by the clocks of the
// workers that committed them) a run's versions may look.
const maxClockSkew = 10 * time.Minute

// KeptSteps returns the steps a rerun of run r from the step keyed from
// keeps as committed: the committed steps whose outputs the from step's
// input descends from (through any parent), so everything the from step
// saw is reused, not re-executed. Every other step — from itself, what
// came after it, and steps it did not depend on (a sibling fan-out
// branch) — runs anew. The kept steps are copies for the new run: key,
// ordinal, target, input, output, digest, attempts and worker as recorded.
func KeptSteps(ctx context.Context, g session.Graph, r runs.Run, from string) ([]runs.Step, error) {
	var start *runs.Step
	outputs := map[session.ID]runs.Step{}
	for i, st := range r.Steps {
		if st.Key == from {
			start = &r.Steps[i]
		}
		if st.Status == runs.StepCommitted && st.Output != nil {
			outputs[*st.Output] = st
		}
	}
	if start == nil {
		keys := make([]string, 0, len(r.Steps))
		for _, st := range r.Steps {
			keys = append(keys, st.Key)
		}
		return nil, fmt.Errorf("rerun: run %s has no step %q (its steps: %v): %w", r.ID, from, keys, ErrBadRerun)
	}
	var kept []runs.Step
	seen := map[session.ID]bool{}
	todo := []session.ID{start.Input}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[id] || id == r.Input {
			continue
		}
		if len(seen) == maxKeptWalk {
			return nil, fmt.Errorf("rerun: the input of step %s descends from more than %d versions", from, maxKeptWalk)
		}
		seen[id] = true
		if st, ok := outputs[id]; ok && st.Key != from {
			kept = append(kept, st)
		}
		v, err := g.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("rerun: input of step %s: %w", from, err)
		}
		if v.CreatedAt.Before(r.CreatedAt.Add(-maxClockSkew)) {
			continue // older than the run: no step of it made this
		}
		todo = append(todo, v.Parents...)
		if v.Base != nil && len(v.Parents) == 0 {
			todo = append(todo, *v.Base)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Ordinal < kept[j].Ordinal })
	return kept, nil
}

// OverrideWorkflow returns the workflow file text with every agent's model
// set to model (when not empty) and the agents named in agents replaced by
// those specs (JSON agent specs; an agent's description is kept when the
// replacement has none). An agent that is not in the file is ErrBadRerun;
// so is an agent given by file reference (a coordinator-driven workflow's
// agents are inline).
func OverrideWorkflow(text, model string, agents map[string]json.RawMessage) (string, error) {
	if model == "" && len(agents) == 0 {
		return text, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return "", fmt.Errorf("rerun: workflow: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", fmt.Errorf("rerun: workflow: not a mapping: %w", ErrBadRerun)
	}
	as := mapValue(doc.Content[0], "agents")
	if as == nil || as.Kind != yaml.MappingNode {
		return "", fmt.Errorf("rerun: workflow has no agents: %w", ErrBadRerun)
	}
	found := map[string]bool{}
	for i := 0; i+1 < len(as.Content); i += 2 {
		name, spec := as.Content[i].Value, as.Content[i+1]
		if repl, ok := agents[name]; ok {
			found[name] = true
			var n yaml.Node
			if err := yaml.Unmarshal(repl, &n); err != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml.MappingNode {
				return "", fmt.Errorf("rerun: agent %s: the replacement spec is not a mapping: %w", name, ErrBadRerun)
			}
			nspec := n.Content[0]
			if spec.Kind == yaml.MappingNode && mapValue(nspec, "description") == nil {
				if d := mapValue(spec, "description"); d != nil {
					nspec.Content = append(nspec.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "description"}, d)
				}
			}
			as.Content[i+1], spec = nspec, nspec
		}
		if model == "" {
			continue
		}
		if spec.Kind != yaml.MappingNode {
			return "", fmt.Errorf("rerun: agent %s is a file reference, which --model cannot change: %w", name, ErrBadRerun)
		}
		if m := mapValue(spec, "model"); m != nil {
			m.Kind, m.Tag, m.Value, m.Style = yaml.ScalarNode, "!!str", model, 0
		} else {
			spec.Content = append(spec.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "model"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: model})
		}
		// A model that is not the scripted one answers live: a script
		// left in the spec would be refused next to it, or unused.
		if model != "scripted" {
			dropKey(spec, "script")
			dropKey(spec, "script_file")
		}
	}
	for name := range agents {
		if !found[name] {
			return "", fmt.Errorf("rerun: --agent %s: the workflow has no agent %s: %w", name, name, ErrBadRerun)
		}
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return "", fmt.Errorf("rerun: workflow: %w", err)
	}
	return string(b), nil
}

// mapValue returns the value of key in mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// dropKey removes key from mapping m.
func dropKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}
