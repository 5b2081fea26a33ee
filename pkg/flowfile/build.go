package flowfile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/selector"
	"github.com/rath-run/rath/pkg/session"
)

// Build turns the file into workflows: its steps as a [flow.Sequence] of
// [flow.Agent], [flow.Parallel], [flow.Compressor] and [selector.Loop]
// values, with named workflows shared wherever they are used. Building
// never executes anything; run the result with [flow.Run] on any runtime.
func (f *File) Build() (flow.Workflow, error) {
	b := &builder{f: f, agents: map[string]*flow.Agent{}, workflows: map[string]*Named{}}
	for _, name := range f.AgentOrder {
		d := f.Agents[name]
		b.agents[name] = &flow.Agent{Spec: d.Spec, Desc: d.Description}
	}
	// Named workflows are created first and filled after, so references
	// resolve to one value whatever the order (Parse refused cycles).
	for _, name := range f.WorkflowOrder {
		b.workflows[name] = &Named{Name: name, Desc: f.Workflows[name].Description}
	}
	for _, name := range f.WorkflowOrder {
		seq, err := b.steps(f.Workflows[name].Steps)
		if err != nil {
			return nil, fmt.Errorf("workflows.%s: %w", name, err)
		}
		b.workflows[name].Steps = seq
	}
	main, err := b.steps(f.Steps)
	if err != nil {
		return nil, err
	}
	return &Named{Name: f.Name, Desc: f.Description, Steps: main}, nil
}

// Named is a named workflow of a file: a sequence of steps with a
// description, so selectors can offer it.
type Named struct {
	Name  string
	Desc  string
	Steps flow.Sequence
}

// Forward runs the steps in order.
func (n *Named) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	return n.Steps.Forward(ctx, s)
}

// Description implements [flow.Describer]: the description, or the name.
func (n *Named) Description() string {
	if n.Desc != "" {
		return n.Desc
	}
	return n.Name
}

type builder struct {
	f         *File
	agents    map[string]*flow.Agent
	workflows map[string]*Named
}

func (b *builder) named(name string) (flow.Workflow, error) {
	if a, ok := b.agents[name]; ok {
		return a, nil
	}
	if w, ok := b.workflows[name]; ok {
		return w, nil
	}
	return nil, fmt.Errorf("%w: unknown agent or workflow %q", ErrInvalid, name)
}

func (b *builder) steps(steps []Step) (flow.Sequence, error) {
	out := make(flow.Sequence, len(steps))
	for i, st := range steps {
		w, err := b.step(st)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", st.Line, err)
		}
		out[i] = w
	}
	return out, nil
}

func (b *builder) step(st Step) (flow.Workflow, error) {
	switch {
	case st.Agent != "":
		a, ok := b.agents[st.Agent]
		if !ok {
			return nil, fmt.Errorf("%w: unknown agent %q", ErrInvalid, st.Agent)
		}
		return a, nil
	case st.Run != "":
		w, ok := b.workflows[st.Run]
		if !ok {
			return nil, fmt.Errorf("%w: unknown workflow %q", ErrInvalid, st.Run)
		}
		return w, nil
	case st.Sequence != nil:
		return b.steps(st.Sequence)
	case st.Fork != nil:
		if st.Fork.Branches == nil {
			w, err := b.named(st.Fork.Agent)
			if err != nil {
				return nil, err
			}
			p := flow.Fanout(st.Fork.N, w)
			p.Limit = st.Fork.Limit
			return p, nil
		}
		p := &flow.Parallel{Limit: st.Fork.Limit}
		for _, name := range st.Fork.Branches {
			w, err := b.named(name)
			if err != nil {
				return nil, err
			}
			p.Branches = append(p.Branches, w)
		}
		return p, nil
	case st.Rollout != nil:
		r := &flow.Rollout{Verifier: st.Rollout.Verifier, Limit: st.Rollout.Limit}
		if name := st.Rollout.Selector; name != "" {
			a, ok := b.agents[name]
			if !ok {
				return nil, fmt.Errorf("%w: unknown agent %q", ErrInvalid, name)
			}
			r.Selector = a
		}
		names := st.Rollout.Branches
		if names == nil {
			names = make([]string, st.Rollout.N)
			for i := range names {
				names[i] = st.Rollout.Agent
			}
		}
		for _, name := range names {
			a, ok := b.agents[name]
			if !ok {
				return nil, fmt.Errorf("%w: unknown agent %q", ErrInvalid, name)
			}
			r.Branches = append(r.Branches, a)
		}
		return r, nil
	case st.Compress != nil:
		a, ok := b.agents[st.Compress.Agent]
		if !ok {
			return nil, fmt.Errorf("%w: unknown agent %q", ErrInvalid, st.Compress.Agent)
		}
		return &flow.Compressor{Spec: a.Spec, Instruction: st.Compress.Instruction, Desc: a.Desc}, nil
	case st.Select != nil:
		a, ok := b.agents[st.Select.Selector]
		if !ok {
			return nil, fmt.Errorf("%w: unknown agent %q", ErrInvalid, st.Select.Selector)
		}
		l := &selector.Loop{Selector: &selector.Selector{Spec: a.Spec, Desc: a.Desc}, MaxRounds: st.Select.MaxRounds}
		for _, name := range st.Select.Candidates {
			w, err := b.named(name)
			if err != nil {
				return nil, err
			}
			l.Candidates = append(l.Candidates, w)
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: empty step", ErrInvalid)
}

// Encode returns the file as a self-contained YAML document: every agent
// inline (file references and script files already read), so a
// coordinator can [Parse] it without the submitter's directory. Parsing the
// result gives an equal File.
func (f *File) Encode() ([]byte, error) {
	agents := yaml.Node{Kind: yaml.MappingNode}
	for _, name := range f.AgentOrder {
		d := f.Agents[name]
		raw, err := json.Marshal(d.Spec)
		if err != nil {
			return nil, fmt.Errorf("encode agent %s: %w", name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("encode agent %s: %w", name, err)
		}
		if d.Description != "" {
			m["description"] = d.Description
		}
		var v yaml.Node
		if err := v.Encode(m); err != nil {
			return nil, fmt.Errorf("encode agent %s: %w", name, err)
		}
		agents.Content = append(agents.Content, scalar(name), &v)
	}
	root := yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v *yaml.Node) { root.Content = append(root.Content, scalar(k), v) }
	add("version", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: "1"})
	if f.Name != "" {
		add("name", scalar(f.Name))
	}
	if f.Description != "" {
		add("description", scalar(f.Description))
	}
	if len(f.AgentOrder) > 0 {
		add("agents", &agents)
	}
	if len(f.WorkflowOrder) > 0 {
		wfs := yaml.Node{Kind: yaml.MappingNode}
		for _, name := range f.WorkflowOrder {
			d := f.Workflows[name]
			w := yaml.Node{Kind: yaml.MappingNode}
			if d.Description != "" {
				w.Content = append(w.Content, scalar("description"), scalar(d.Description))
			}
			w.Content = append(w.Content, scalar("steps"), encodeSteps(d.Steps))
			wfs.Content = append(wfs.Content, scalar(name), &w)
		}
		add("workflows", &wfs)
	}
	add("steps", encodeSteps(f.Steps))
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, fmt.Errorf("encode workflow: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode workflow: %w", err)
	}
	return buf.Bytes(), nil
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func intNode(i int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: fmt.Sprint(i)}
}

func names(ns []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range ns {
		n.Content = append(n.Content, scalar(s))
	}
	return n
}

func encodeSteps(steps []Step) *yaml.Node {
	out := &yaml.Node{Kind: yaml.SequenceNode}
	for _, st := range steps {
		m := &yaml.Node{Kind: yaml.MappingNode}
		kv := func(k string, v *yaml.Node) { m.Content = append(m.Content, scalar(k), v) }
		switch {
		case st.Agent != "":
			kv("agent", scalar(st.Agent))
		case st.Run != "":
			kv("run", scalar(st.Run))
		case st.Sequence != nil:
			kv("sequence", encodeSteps(st.Sequence))
		case st.Fork != nil:
			kv("fork", branchesNode(st.Fork.Branches, st.Fork.N, st.Fork.Agent, st.Fork.Limit))
		case st.Rollout != nil:
			r := branchesNode(st.Rollout.Branches, st.Rollout.N, st.Rollout.Agent, st.Rollout.Limit)
			if st.Rollout.Verifier.Command != "" {
				v := &yaml.Node{Kind: yaml.MappingNode}
				v.Content = append(v.Content, scalar("command"), scalar(st.Rollout.Verifier.Command))
				if t := st.Rollout.Verifier.TimeoutSeconds; t > 0 {
					v.Content = append(v.Content, scalar("timeout_seconds"),
						&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(t, 'g', -1, 64)})
				}
				r.Content = append(r.Content, scalar("verifier"), v)
			}
			if st.Rollout.Selector != "" {
				r.Content = append(r.Content, scalar("selector"), scalar(st.Rollout.Selector))
			}
			kv("rollout", r)
		case st.Compress != nil:
			c := &yaml.Node{Kind: yaml.MappingNode}
			c.Content = append(c.Content, scalar("agent"), scalar(st.Compress.Agent))
			if st.Compress.Instruction != "" {
				c.Content = append(c.Content, scalar("instruction"), scalar(st.Compress.Instruction))
			}
			kv("compress", c)
		case st.Select != nil:
			s := &yaml.Node{Kind: yaml.MappingNode}
			s.Content = append(s.Content, scalar("selector"), scalar(st.Select.Selector),
				scalar("candidates"), names(st.Select.Candidates), scalar("max_rounds"), intNode(st.Select.MaxRounds))
			kv("select", s)
		}
		out.Content = append(out.Content, m)
	}
	return out
}

// branchesNode encodes the branches a fork or a rollout makes: a list of
// agents, or n copies of one, and the limit on how many run at once.
func branchesNode(branches []string, n int, agent string, limit int) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	if branches != nil {
		m.Content = append(m.Content, scalar("branches"), names(branches))
	} else {
		m.Content = append(m.Content, scalar("n"), intNode(n), scalar("agent"), scalar(agent))
	}
	if limit > 0 {
		m.Content = append(m.Content, scalar("limit"), intNode(limit))
	}
	return m
}
