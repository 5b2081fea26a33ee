package flowfile

import (
	"fmt"
	"strings"
)

// check resolves every name steps use and refuses workflows that refer to
// themselves, directly or through other workflows.
func (p *parser) check(f *File) error {
	edges := map[string][]ref{} // workflow → the workflows its steps use
	for _, r := range p.refs {
		_, isAgent := f.Agents[r.name]
		_, isWorkflow := f.Workflows[r.name]
		switch {
		case r.kind == refAgent && !isAgent:
			if isWorkflow {
				return p.errAt(r.node, r.field, "%q is a workflow, not an agent (use run: %s)", r.name, r.name)
			}
			return p.errAt(r.node, r.field, "unknown agent %q%s", r.name, known(f.AgentOrder))
		case r.kind == refWorkflow && !isWorkflow:
			if isAgent {
				return p.errAt(r.node, r.field, "%q is an agent, not a workflow (use agent: %s)", r.name, r.name)
			}
			return p.errAt(r.node, r.field, "unknown workflow %q%s", r.name, known(f.WorkflowOrder))
		case r.kind == refAny && !isAgent && !isWorkflow:
			return p.errAt(r.node, r.field, "unknown agent or workflow %q%s", r.name, known(append(append([]string{}, f.AgentOrder...), f.WorkflowOrder...)))
		}
		if isWorkflow {
			edges[r.owner] = append(edges[r.owner], r)
		}
	}
	// Depth-first search from every workflow; a back edge is a cycle.
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(w string) error
	visit = func(w string) error {
		state[w] = active
		path = append(path, w)
		for _, r := range edges[w] {
			switch state[r.name] {
			case active:
				i := 0
				for path[i] != r.name {
					i++
				}
				cycle := append(append([]string{}, path[i:]...), r.name)
				return p.errAt(r.node, r.field, "cycle: workflow %s", strings.Join(cycle, " → "))
			case unseen:
				if err := visit(r.name); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		state[w] = done
		return nil
	}
	for _, w := range f.WorkflowOrder {
		if state[w] == unseen {
			if err := visit(w); err != nil {
				return err
			}
		}
	}
	return nil
}

func known(names []string) string {
	if len(names) == 0 {
		return " (none are defined)"
	}
	const show = 10
	if len(names) > show {
		return fmt.Sprintf(" (known: %s, …)", strings.Join(names[:show], ", "))
	}
	return fmt.Sprintf(" (known: %s)", strings.Join(names, ", "))
}
