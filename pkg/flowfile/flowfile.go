// Package flowfile is Rath's declarative workflow format: a YAML file of
// agents and steps for users who do not write Go. [Parse] reads and
// validates a file; [File.Build] turns it into the same [flow.Workflow]
// values a Go program would write, so a declarative workflow runs on any
// runtime (in-process, or durably on the cluster, driven by the
// coordinator).
//
// # Format
//
//	version: 1                      # optional; 1 is the only version
//	name: triage                    # optional: [a-z0-9][a-z0-9_.-]*
//	description: Route a ticket.    # optional
//	agents:                         # name → agent
//	  triager:                      # an inline agent spec (package agent);
//	    model: scripted             # its name defaults to the key
//	    instructions: Sort tickets.
//	    script: [billing]
//	    description: Sorts tickets. # for selectors; not part of the spec
//	  writer: agents/writer.yaml    # a spec file, relative to this file
//	  fixer: {file: agents/fixer.yaml, description: Fixes bugs.}
//	  builder:                      # its tools run in a docker sandbox
//	    model: scripted
//	    tools: [builtin]
//	    sandbox: {backend: docker, image: rath-sandbox:busybox}
//	workflows:                      # optional named sub-workflows
//	  research:
//	    description: Look it up.
//	    steps: [{agent: triager}]
//	steps:                          # the main workflow, in order
//	  - agent: triager              # one agent step
//	  - run: research               # a named workflow
//	  - fork: {n: 3, agent: writer} # n branches of one agent or workflow,
//	  - fork: {branches: [writer, research], limit: 2} # or one per name;
//	                                # both merge their branches at the end
//	  - compress: summarizer        # or {agent: summarizer, instruction: …}
//	  - select: {selector: router, candidates: [writer, fixer], max_rounds: 5}
//	  - rollout: {n: 4, agent: writer, verifier: "sh check.sh"} # or
//	                                # branches: [writer, fixer]; verifier
//	                                # also {command, timeout_seconds};
//	                                # selector: judge chooses a branch
//	  - sequence: [{agent: writer}, {agent: fixer}]
//
// Each step is a mapping with exactly one of the keys agent, run, fork,
// compress, select, rollout and sequence. Names in fork branches and select
// candidates may be agents or workflows (the two share one namespace).
//
// A fork step is a fan-out with an implicit fan-in: every branch gets a
// fork of the step's input, and the step's output is the branches' outputs
// merged in branch order (see [flow.Parallel]). There is no separate merge
// step. A select step is a bounded loop ([selector.Loop]): choose a
// candidate, run it, repeat until the selector chooses none (-1) or
// max_rounds candidates have run; max_rounds is required. A rollout step
// ([flow.Rollout]) forks the input once per branch (agents only), runs
// each branch's agent, scores each branch with the verifier command in the
// branch's sandbox (a score chunk on the branch) and continues with the
// best-scored branch; the verifier is required.
//
// # Sandboxes
//
// An agent may carry a sandbox block, as any agent spec may (package
// agent: backend, image, network, timeout_seconds). Every agent step of
// that agent (agent, fork branch, select candidate) runs on that placement:
// before the step, the driver records its input session placed there (a
// version with op place, unless the input is placed there already), so the
// step's tools run in that sandbox and the lineage shows where. An agent
// without the block runs where its input session is placed, as an agent
// run does: after a docker agent, that is docker. Selectors and compressors
// run no tools: their block is checked but places nothing. The operator's
// sandbox policy bounds the blocks: the coordinator refuses a file whose
// block it does not allow at submit ([File.CheckSandboxes]), naming the
// block's field and line.
//
// # Limits
//
// A file is at most [MaxFileBytes]; at most [MaxAgents] agents,
// [MaxWorkflows] workflows and [MaxSteps] steps in any one list; nesting
// at most [MaxDepth] deep; fork n in 1..[MaxForkN], at most [MaxForkN]
// branches; select max_rounds in 1..[selector.MaxLoopRounds] and at most
// [flow.MaxCandidates] candidates. Workflows may not refer to themselves,
// directly or through others.
//
// # Errors
//
// Every validation error is an [*Error] carrying the YAML line and column
// of the offending node: unknown keys, unknown agents or workflows, cycles,
// missing max_rounds, n out of range, and bad agent specs.
package flowfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/selector"
)

// Limits.
const (
	MaxFileBytes  = 1 << 20
	MaxAgents     = 256
	MaxWorkflows  = 256
	MaxSteps      = 1000
	MaxDepth      = 32
	MaxForkN      = 1000
	MaxNameBytes  = 63
	maxDescBytes  = 4096
	maxInstrBytes = 64 << 10
)

// ErrInvalid wraps every error [Parse] returns.
var ErrInvalid = errors.New("rath: invalid workflow file")

// Error is a validation error at a position of the file.
type Error struct {
	// File is the file's name ("" when parsed from memory).
	File string
	// Line and Column are 1-based; 0 when unknown.
	Line, Column int
	// Field is the path of the offending field, such as "steps[2].fork.n".
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Column)
	} else if e.File != "" {
		b.WriteString(" ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes every Error match [ErrInvalid].
func (e *Error) Unwrap() error { return ErrInvalid }

// File is a parsed, validated workflow file.
type File struct {
	Version     int
	Name        string
	Description string
	// Agents by name, and their names in file order.
	Agents     map[string]*AgentDef
	AgentOrder []string
	// Workflows by name, and their names in file order.
	Workflows     map[string]*WorkflowDef
	WorkflowOrder []string
	// Steps is the main workflow.
	Steps []Step
}

// AgentDef is one entry of agents.
type AgentDef struct {
	Name        string
	Spec        agent.Spec
	Description string
	Line        int
	Column      int
	// sandboxAt locates the spec's sandbox block: "" is its key, the
	// others its fields (backend, image, …) when they are inline; nil
	// without a block. [File.CheckSandboxes] names these positions.
	sandboxAt map[string]position
	// spec is the inline spec's mapping (nil for a spec from a file):
	// [File.CheckAgents] locates the fields it names in it.
	spec *yaml.Node
}

// position is a line and column of the file.
type position struct{ line, column int }

// WorkflowDef is one entry of workflows.
type WorkflowDef struct {
	Name        string
	Description string
	Steps       []Step
	Line        int
	Column      int
}

// Step is one step; exactly one of its kinds is set.
type Step struct {
	Agent    string
	Run      string
	Fork     *Fork
	Compress *Compress
	Select   *Select
	Rollout  *Rollout
	Sequence []Step
	// Line and Column locate the step in the file.
	Line, Column int
}

// Fork is a fan-out with fan-in by merge: N copies of Agent, or one branch
// per name of Branches.
type Fork struct {
	N        int
	Agent    string
	Branches []string
	// Limit bounds the branches running at once; 0 runs all.
	Limit int
}

// Rollout forks the input N times (copies of Agent, or one branch per
// agent of Branches), runs each branch's agent and scores it with
// Verifier; see [flow.Rollout].
type Rollout struct {
	N        int
	Agent    string
	Branches []string
	Limit    int
	// Verifier is zero when the rollout has only a selector.
	Verifier flow.Verifier
	// Selector names the agent that chooses among the branches ("" for
	// none).
	Selector string
}

// Compress names the agent whose model compresses, and the instruction.
type Compress struct {
	Agent       string
	Instruction string
}

// Select is a bounded selector loop.
type Select struct {
	Selector   string
	Candidates []string
	MaxRounds  int
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// Load reads the file at path and parses it; agent file references and
// script_file entries are read relative to the file's directory.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load workflow: %w", err)
	}
	dir := filepath.Dir(path)
	return Parse(filepath.Base(path), data, func(rel string) ([]byte, error) {
		if filepath.IsAbs(rel) {
			return os.ReadFile(rel)
		}
		return os.ReadFile(filepath.Join(dir, rel))
	})
}

// ReadFunc reads a file an agent entry or a script_file names.
type ReadFunc func(rel string) ([]byte, error)

// Parse parses and validates a workflow file. name labels errors; read
// resolves agent file references and script_file entries (nil: they are
// errors, so a coordinator accepts only self-contained files, see
// [File.Encode]).
func Parse(name string, data []byte, read ReadFunc) (*File, error) {
	p := &parser{file: name, read: read}
	f, err := p.parse(data)
	if err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	file string
	read ReadFunc
	// owner is the workflow whose steps are being parsed ("" for the
	// main steps); refs are the names steps use, checked after parsing.
	owner string
	refs  []ref
}

// refKind is what a name used in a step may name.
type refKind int

const (
	refAgent    refKind = iota // an agent
	refWorkflow                // a workflow
	refAny                     // an agent or a workflow
)

type ref struct {
	name  string
	kind  refKind
	owner string
	field string
	node  *yaml.Node
}

// use records a name a step uses.
func (p *parser) use(n *yaml.Node, field, name string, kind refKind) {
	p.refs = append(p.refs, ref{name: name, kind: kind, owner: p.owner, field: field, node: n})
}

func (p *parser) errAt(n *yaml.Node, field, format string, args ...any) *Error {
	e := &Error{File: p.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// mapping checks that n is a mapping with only the allowed keys, each
// once, and returns its entries by key (with the key nodes).
func (p *parser) mapping(n *yaml.Node, field string, allowed ...string) (map[string]*yaml.Node, map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nil, p.errAt(n, field, "must be a mapping, not %s", kindName(n))
	}
	vals := make(map[string]*yaml.Node, len(n.Content)/2)
	keys := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, nil, p.errAt(k, field, "keys must be strings")
		}
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			return nil, nil, p.errAt(k, join(field, k.Value), "unknown key (allowed: %s)", strings.Join(allowed, ", "))
		}
		if _, dup := vals[k.Value]; dup {
			return nil, nil, p.errAt(k, join(field, k.Value), "duplicate key")
		}
		vals[k.Value], keys[k.Value] = v, k
	}
	return vals, keys, nil
}

func (p *parser) str(n *yaml.Node, field string, limit int) (string, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "") {
		return "", p.errAt(n, field, "must be a string, not %s", kindName(n))
	}
	if len(n.Value) > limit {
		return "", p.errAt(n, field, "%d bytes, limit %d", len(n.Value), limit)
	}
	return n.Value, nil
}

func (p *parser) intIn(n *yaml.Node, field string, lo, hi int) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, p.errAt(n, field, "must be an integer in %d..%d", lo, hi)
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < lo || v > hi {
		return 0, p.errAt(n, field, "%s is outside %d..%d", n.Value, lo, hi)
	}
	return v, nil
}

func (p *parser) name(n *yaml.Node, field string) (string, error) {
	s, err := p.str(n, field, MaxNameBytes)
	if err != nil {
		return "", err
	}
	if !nameRE.MatchString(s) {
		return "", p.errAt(n, field, "%q must match %s", s, nameRE)
	}
	return s, nil
}

func (p *parser) names(n *yaml.Node, field string, limit int) ([]string, []*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, nil, p.errAt(n, field, "must be a list of names, not %s", kindName(n))
	}
	if len(n.Content) > limit {
		return nil, nil, p.errAt(n, field, "%d entries, limit %d", len(n.Content), limit)
	}
	out := make([]string, len(n.Content))
	for i, c := range n.Content {
		s, err := p.name(c, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, nil, err
		}
		out[i] = s
	}
	return out, n.Content, nil
}

func (p *parser) parse(data []byte) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, p.errAt(nil, "", "%d bytes, limit %d", len(data), MaxFileBytes)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, p.errAt(nil, "", "not YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, p.errAt(&extra, "", "a workflow file holds one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, p.errAt(&doc, "", "empty document")
	}
	root := doc.Content[0]
	if err := checkAliases(p, root, 0); err != nil {
		return nil, err
	}
	vals, _, err := p.mapping(root, "", "version", "name", "description", "agents", "workflows", "steps")
	if err != nil {
		return nil, err
	}
	f := &File{Version: 1, Agents: map[string]*AgentDef{}, Workflows: map[string]*WorkflowDef{}}
	if n := vals["version"]; n != nil {
		if f.Version, err = p.intIn(n, "version", 1, 1); err != nil {
			return nil, err
		}
	}
	if n := vals["name"]; n != nil {
		if f.Name, err = p.name(n, "name"); err != nil {
			return nil, err
		}
	}
	if n := vals["description"]; n != nil {
		if f.Description, err = p.str(n, "description", maxDescBytes); err != nil {
			return nil, err
		}
	}
	if n := vals["agents"]; n != nil {
		if err := p.agents(f, n); err != nil {
			return nil, err
		}
	}
	if n := vals["workflows"]; n != nil {
		if err := p.workflows(f, n); err != nil {
			return nil, err
		}
	}
	n := vals["steps"]
	if n == nil {
		return nil, p.errAt(root, "steps", "required: the workflow's steps")
	}
	if f.Steps, err = p.steps(n, "steps", 0); err != nil {
		return nil, err
	}
	if len(f.Steps) == 0 {
		return nil, p.errAt(n, "steps", "at least one step is required")
	}
	if err := p.check(f); err != nil {
		return nil, err
	}
	return f, nil
}

// checkAliases refuses aliases (which YAML bombs are made of) and bounds
// nesting.
func checkAliases(p *parser, n *yaml.Node, depth int) error {
	if depth > 4*MaxDepth+16 {
		return p.errAt(n, "", "nested more than %d levels", 4*MaxDepth+16)
	}
	if n.Kind == yaml.AliasNode {
		return p.errAt(n, "", "YAML aliases are not supported")
	}
	for _, c := range n.Content {
		if err := checkAliases(p, c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) agents(f *File, n *yaml.Node) error {
	vals, keys, err := p.mapping(n, "agents")
	if err != nil {
		return err
	}
	if len(vals) > MaxAgents {
		return p.errAt(n, "agents", "%d agents, limit %d", len(vals), MaxAgents)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		name, err := p.name(keys[k.Value], "agents")
		if err != nil {
			return err
		}
		def, err := p.agent(name, vals[k.Value])
		if err != nil {
			return err
		}
		def.Line, def.Column = k.Line, k.Column
		f.Agents[name] = def
		f.AgentOrder = append(f.AgentOrder, name)
	}
	return nil
}

func (p *parser) agent(name string, n *yaml.Node) (*AgentDef, error) {
	field := "agents." + name
	def := &AgentDef{Name: name}
	var specNode *yaml.Node
	var fromFile string
	switch n.Kind {
	case yaml.ScalarNode:
		path, err := p.str(n, field, 4096)
		if err != nil {
			return nil, err
		}
		fromFile = path
	case yaml.MappingNode:
		vals, _, err := p.mapping(n, field)
		if err != nil {
			return nil, err
		}
		if d := vals["description"]; d != nil {
			if def.Description, err = p.str(d, field+".description", maxDescBytes); err != nil {
				return nil, err
			}
		}
		if fn := vals["file"]; fn != nil {
			for k := range vals {
				if k != "file" && k != "description" {
					return nil, p.errAt(n, field, "an agent given by file takes only file and description, not %s", k)
				}
			}
			if fromFile, err = p.str(fn, field+".file", 4096); err != nil {
				return nil, err
			}
			break
		}
		// An inline spec: the mapping without description.
		specNode = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value != "description" {
				specNode.Content = append(specNode.Content, n.Content[i], n.Content[i+1])
			}
		}
	default:
		return nil, p.errAt(n, field, "must be an agent spec (a mapping) or a spec file path, not %s", kindName(n))
	}
	var raw []byte
	if fromFile != "" {
		if p.read == nil {
			return nil, p.errAt(n, field, "refers to file %q, but this file was submitted without its directory: inline the agent (rathctl does)", fromFile)
		}
		b, err := p.read(fromFile)
		if err != nil {
			return nil, p.errAt(n, field, "read %s: %v", fromFile, err)
		}
		raw = b
	} else {
		b, err := yaml.Marshal(specNode)
		if err != nil {
			return nil, p.errAt(n, field, "encode spec: %v", err)
		}
		raw = b
	}
	spec, err := parseSpec(raw, name)
	if err != nil {
		at := n
		if specNode != nil {
			if at = specField(specNode, err); at == specNode {
				at = n
			}
		}
		return nil, p.errAt(at, field, "%v", err)
	}
	def.spec = specNode
	if spec.Sandbox != nil {
		// Steps of this agent run on the block's placement (the driver
		// places their input sessions); the operator's policy is checked
		// at submit ([File.CheckSandboxes]), naming these positions.
		def.sandboxAt = sandboxPositions(n, specNode)
	}
	if spec.ScriptFile != "" {
		if p.read == nil {
			return nil, p.errAt(n, field+".script_file", "file %q cannot be read: inline the script (rathctl does)", spec.ScriptFile)
		}
		b, err := p.read(spec.ScriptFile)
		if err != nil {
			return nil, p.errAt(n, field+".script_file", "read %s: %v", spec.ScriptFile, err)
		}
		replies, err := llm.ParseScript(b)
		if err != nil {
			return nil, p.errAt(n, field+".script_file", "%s: %v", spec.ScriptFile, err)
		}
		spec.Script, spec.ScriptFile = replies, ""
		if err := spec.Validate(); err != nil {
			return nil, p.errAt(n, field, "%v", err)
		}
	}
	def.Spec = spec
	return def, nil
}

// specField returns the key node of the inline spec field an agent spec
// error names ("…: limits.max_tool_rounds: …" or `unknown field "x"`): the
// innermost key of the path found in nested mappings ("max_tool_rounds"
// in limits), or the spec itself.
func specField(spec *yaml.Node, err error) *yaml.Node {
	msg := err.Error()
	var path []string
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		path = []string{m[1]}
	} else if m := typeFieldRE.FindStringSubmatch(msg); m != nil {
		path = strings.Split(m[1], ".")
	} else if rest, ok := strings.CutPrefix(msg, agent.ErrInvalidSpec.Error()+": "); ok {
		field, _, _ := strings.Cut(rest, ": ")
		for _, k := range strings.Split(field, ".") {
			k, _, _ = strings.Cut(k, "[")
			path = append(path, k)
		}
	}
	at, m := spec, spec
	for i, key := range path {
		k, v := mappingKey(m, key)
		if k == nil && i == 0 && len(path) == 1 {
			// An unknown field may be one of a nested block's.
			k = findKey(spec, key, 0)
		}
		if k == nil {
			break
		}
		at, m = k, v
	}
	return at
}

// findKey returns the first key node named key in the mappings nested in
// n (depth-first, at most MaxDepth deep), or nil.
func findKey(n *yaml.Node, key string, depth int) *yaml.Node {
	if n == nil || depth > MaxDepth {
		return nil
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i]
			}
		}
	}
	for _, c := range n.Content {
		if k := findKey(c, key, depth+1); k != nil {
			return k
		}
	}
	return nil
}

// mappingKey returns the key and value nodes of key in mapping m, or nils.
func mappingKey(m *yaml.Node, key string) (k, v *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode || key == "" {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// sandboxPositions locates an agent's sandbox block: the key of an inline
// spec's block and its fields, or the agent's own node for a spec file.
func sandboxPositions(agentNode, spec *yaml.Node) map[string]position {
	at := map[string]position{"": {agentNode.Line, agentNode.Column}}
	k, v := mappingKey(spec, "sandbox")
	if k == nil {
		return at
	}
	at[""] = position{k.Line, k.Column}
	if v.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(v.Content); i += 2 {
			at[v.Content[i].Value] = position{v.Content[i].Line, v.Content[i].Column}
		}
	}
	return at
}

var (
	unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)
	// typeFieldRE finds the field of encoding/json's type errors ("cannot
	// unmarshal string into Go struct field Spec.sandbox of type …").
	typeFieldRE = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.([A-Za-z0-9_.]+) of type`)
)

// parseSpec parses a spec whose name defaults to the agent's key.
func parseSpec(raw []byte, name string) (agent.Spec, error) {
	var probe map[string]any
	if err := yaml.Unmarshal(raw, &probe); err == nil && probe != nil {
		if _, ok := probe["name"]; !ok {
			probe["name"] = name
			if b, err := yaml.Marshal(probe); err == nil {
				raw = b
			}
		}
	}
	return agent.ParseSpec(raw)
}

func (p *parser) workflows(f *File, n *yaml.Node) error {
	_, keys, err := p.mapping(n, "workflows")
	if err != nil {
		return err
	}
	if len(keys) > MaxWorkflows {
		return p.errAt(n, "workflows", "%d workflows, limit %d", len(keys), MaxWorkflows)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, err := p.name(k, "workflows")
		if err != nil {
			return err
		}
		if _, dup := f.Agents[name]; dup {
			return p.errAt(k, "workflows."+name, "%q is already an agent's name (agents and workflows share names)", name)
		}
		field := "workflows." + name
		vals, _, err := p.mapping(v, field, "description", "steps")
		if err != nil {
			return err
		}
		def := &WorkflowDef{Name: name, Line: k.Line, Column: k.Column}
		if d := vals["description"]; d != nil {
			if def.Description, err = p.str(d, field+".description", maxDescBytes); err != nil {
				return err
			}
		}
		sn := vals["steps"]
		if sn == nil {
			return p.errAt(v, field+".steps", "required")
		}
		p.owner = name
		def.Steps, err = p.steps(sn, field+".steps", 0)
		p.owner = ""
		if err != nil {
			return err
		}
		if len(def.Steps) == 0 {
			return p.errAt(sn, field+".steps", "at least one step is required")
		}
		f.Workflows[name] = def
		f.WorkflowOrder = append(f.WorkflowOrder, name)
	}
	return nil
}

var stepKinds = []string{"agent", "run", "fork", "compress", "select", "rollout", "sequence"}

func (p *parser) steps(n *yaml.Node, field string, depth int) ([]Step, error) {
	if depth > MaxDepth {
		return nil, p.errAt(n, field, "sequences nested more than %d deep", MaxDepth)
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errAt(n, field, "must be a list of steps, not %s", kindName(n))
	}
	if len(n.Content) > MaxSteps {
		return nil, p.errAt(n, field, "%d steps, limit %d", len(n.Content), MaxSteps)
	}
	out := make([]Step, len(n.Content))
	for i, c := range n.Content {
		st, err := p.step(c, fmt.Sprintf("%s[%d]", field, i), depth)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

func (p *parser) step(n *yaml.Node, field string, depth int) (Step, error) {
	vals, _, err := p.mapping(n, field, stepKinds...)
	if err != nil {
		return Step{}, err
	}
	if len(vals) != 1 {
		return Step{}, p.errAt(n, field, "a step has exactly one of %s (found %d)", strings.Join(stepKinds, ", "), len(vals))
	}
	st := Step{Line: n.Line, Column: n.Column}
	for kind, v := range vals {
		f := field + "." + kind
		switch kind {
		case "agent":
			if st.Agent, err = p.name(v, f); err == nil {
				p.use(v, f, st.Agent, refAgent)
			}
		case "run":
			if st.Run, err = p.name(v, f); err == nil {
				p.use(v, f, st.Run, refWorkflow)
			}
		case "sequence":
			st.Sequence, err = p.steps(v, f, depth+1)
			if err == nil && len(st.Sequence) == 0 {
				err = p.errAt(v, f, "at least one step is required")
			}
		case "fork":
			st.Fork, err = p.fork(v, f)
		case "compress":
			st.Compress, err = p.compress(v, f)
		case "select":
			st.Select, err = p.selectStep(v, f)
		case "rollout":
			st.Rollout, err = p.rollout(v, f)
		}
	}
	return st, err
}

func (p *parser) fork(n *yaml.Node, field string) (*Fork, error) {
	vals, _, err := p.mapping(n, field, "n", "agent", "branches", "limit")
	if err != nil {
		return nil, err
	}
	fk := &Fork{}
	switch {
	case vals["branches"] != nil && (vals["n"] != nil || vals["agent"] != nil):
		return nil, p.errAt(n, field, "use either n and agent (copies of one) or branches (one per name), not both")
	case vals["branches"] != nil:
		var nodes []*yaml.Node
		if fk.Branches, nodes, err = p.names(vals["branches"], field+".branches", MaxForkN); err != nil {
			return nil, err
		}
		for i, b := range fk.Branches {
			p.use(nodes[i], fmt.Sprintf("%s.branches[%d]", field, i), b, refAny)
		}
		if len(fk.Branches) == 0 {
			return nil, p.errAt(vals["branches"], field+".branches", "at least one branch is required")
		}
	case vals["n"] == nil:
		return nil, p.errAt(n, field+".n", "required (1..%d) with agent, or give branches", MaxForkN)
	case vals["agent"] == nil:
		return nil, p.errAt(n, field+".agent", "required: the agent or workflow each branch runs")
	default:
		if fk.N, err = p.intIn(vals["n"], field+".n", 1, MaxForkN); err != nil {
			return nil, err
		}
		if fk.Agent, err = p.name(vals["agent"], field+".agent"); err != nil {
			return nil, err
		}
		p.use(vals["agent"], field+".agent", fk.Agent, refAny)
	}
	if l := vals["limit"]; l != nil {
		if fk.Limit, err = p.intIn(l, field+".limit", 1, MaxForkN); err != nil {
			return nil, err
		}
	}
	return fk, nil
}

func (p *parser) rollout(n *yaml.Node, field string) (*Rollout, error) {
	vals, _, err := p.mapping(n, field, "n", "agent", "branches", "limit", "verifier", "selector")
	if err != nil {
		return nil, err
	}
	r := &Rollout{}
	switch {
	case vals["branches"] != nil && (vals["n"] != nil || vals["agent"] != nil):
		return nil, p.errAt(n, field, "use either n and agent (copies of one) or branches (one per agent), not both")
	case vals["branches"] != nil:
		var nodes []*yaml.Node
		if r.Branches, nodes, err = p.names(vals["branches"], field+".branches", MaxForkN); err != nil {
			return nil, err
		}
		for i, b := range r.Branches {
			p.use(nodes[i], fmt.Sprintf("%s.branches[%d]", field, i), b, refAgent)
		}
		if len(r.Branches) == 0 {
			return nil, p.errAt(vals["branches"], field+".branches", "at least one branch is required")
		}
	case vals["n"] == nil:
		return nil, p.errAt(n, field+".n", "required (1..%d) with agent, or give branches", MaxForkN)
	case vals["agent"] == nil:
		return nil, p.errAt(n, field+".agent", "required: the agent each branch runs")
	default:
		if r.N, err = p.intIn(vals["n"], field+".n", 1, MaxForkN); err != nil {
			return nil, err
		}
		if r.Agent, err = p.name(vals["agent"], field+".agent"); err != nil {
			return nil, err
		}
		p.use(vals["agent"], field+".agent", r.Agent, refAgent)
	}
	if l := vals["limit"]; l != nil {
		if r.Limit, err = p.intIn(l, field+".limit", 1, MaxForkN); err != nil {
			return nil, err
		}
	}
	if sn := vals["selector"]; sn != nil {
		if r.Selector, err = p.name(sn, field+".selector"); err != nil {
			return nil, err
		}
		p.use(sn, field+".selector", r.Selector, refAgent)
		if len(r.Branches) > flow.MaxCandidates || r.N > flow.MaxCandidates {
			return nil, p.errAt(sn, field+".selector", "a selector chooses among at most %d branches", flow.MaxCandidates)
		}
	}
	vn := vals["verifier"]
	if vn == nil {
		if r.Selector != "" {
			return r, nil
		}
		return nil, p.errAt(n, field+".verifier", "required: the command that scores each branch (exit code 0 is 1.0, else 0.0; or stdout {\"score\": N}), unless a selector chooses")
	}
	if r.Verifier, err = p.verifier(vn, field+".verifier"); err != nil {
		return nil, err
	}
	return r, nil
}

// verifier parses a verifier: a command string or {command,
// timeout_seconds}.
func (p *parser) verifier(n *yaml.Node, field string) (flow.Verifier, error) {
	var v flow.Verifier
	cmdNode := n
	if n.Kind == yaml.MappingNode {
		vals, _, err := p.mapping(n, field, "command", "timeout_seconds")
		if err != nil {
			return v, err
		}
		if vals["command"] == nil {
			return v, p.errAt(n, field+".command", "required: run with /bin/sh -c in the branch's workspace")
		}
		cmdNode = vals["command"]
		if t := vals["timeout_seconds"]; t != nil {
			if t.Kind != yaml.ScalarNode || (t.Tag != "!!int" && t.Tag != "!!float") {
				return v, p.errAt(t, field+".timeout_seconds", "must be a number of seconds in 0..%d", flow.MaxVerifierTimeoutSeconds)
			}
			f, err := strconv.ParseFloat(t.Value, 64)
			if err != nil || f < 0 || f > flow.MaxVerifierTimeoutSeconds {
				return v, p.errAt(t, field+".timeout_seconds", "%s is outside 0..%d", t.Value, flow.MaxVerifierTimeoutSeconds)
			}
			v.TimeoutSeconds = f
		}
		field += ".command"
	}
	cmd, err := p.str(cmdNode, field, flow.MaxVerifierCommandBytes)
	if err != nil {
		return v, err
	}
	v.Command = cmd
	if err := v.Validate(); err != nil {
		return v, p.errAt(cmdNode, field, "%s", strings.TrimPrefix(err.Error(), "command: "))
	}
	return v, nil
}

func (p *parser) compress(n *yaml.Node, field string) (*Compress, error) {
	c := &Compress{}
	var err error
	if n.Kind == yaml.ScalarNode {
		if c.Agent, err = p.name(n, field); err != nil {
			return nil, err
		}
		p.use(n, field, c.Agent, refAgent)
		return c, nil
	}
	vals, _, err := p.mapping(n, field, "agent", "instruction")
	if err != nil {
		return nil, err
	}
	if vals["agent"] == nil {
		return nil, p.errAt(n, field+".agent", "required: the agent whose model compresses")
	}
	if c.Agent, err = p.name(vals["agent"], field+".agent"); err != nil {
		return nil, err
	}
	p.use(vals["agent"], field+".agent", c.Agent, refAgent)
	if in := vals["instruction"]; in != nil {
		if c.Instruction, err = p.str(in, field+".instruction", maxInstrBytes); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (p *parser) selectStep(n *yaml.Node, field string) (*Select, error) {
	vals, _, err := p.mapping(n, field, "selector", "candidates", "max_rounds")
	if err != nil {
		return nil, err
	}
	s := &Select{}
	switch {
	case vals["selector"] == nil:
		return nil, p.errAt(n, field+".selector", "required: the agent that chooses")
	case vals["candidates"] == nil:
		return nil, p.errAt(n, field+".candidates", "required: the agents or workflows to choose among")
	case vals["max_rounds"] == nil:
		return nil, p.errAt(n, field+".max_rounds", "required: a select loop must be bounded (1..%d)", selector.MaxLoopRounds)
	}
	if s.Selector, err = p.name(vals["selector"], field+".selector"); err != nil {
		return nil, err
	}
	p.use(vals["selector"], field+".selector", s.Selector, refAgent)
	var nodes []*yaml.Node
	if s.Candidates, nodes, err = p.names(vals["candidates"], field+".candidates", flow.MaxCandidates); err != nil {
		return nil, err
	}
	for i, c := range s.Candidates {
		p.use(nodes[i], fmt.Sprintf("%s.candidates[%d]", field, i), c, refAny)
	}
	if len(s.Candidates) == 0 {
		return nil, p.errAt(vals["candidates"], field+".candidates", "at least one candidate is required")
	}
	if s.MaxRounds, err = p.intIn(vals["max_rounds"], field+".max_rounds", 1, selector.MaxLoopRounds); err != nil {
		return nil, err
	}
	return s, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return "a " + strings.TrimPrefix(n.Tag, "!!")
	case yaml.AliasNode:
		return "an alias"
	}
	return "an empty node"
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}
