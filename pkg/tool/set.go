package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrUnknownTool is returned by [Registry.Select] for a name no tool or group
// has.
var ErrUnknownTool = errors.New("rath: unknown tool")

// nameRE is what OpenAI accepts as a function name.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Registry holds the tools a worker offers, by name, and named groups of
// them ("builtin"). Agents choose from it by name with [Registry.Select].
// The zero value is empty and ready; it is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	tools  map[string]Tool
	groups map[string][]string
}

// Register adds tools. A name that is not a valid function name, or that is
// taken by a tool or a group, is an error; nothing is added then.
func (r *Registry) Register(ts ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]Tool{}
	}
	seen := map[string]bool{}
	for _, t := range ts {
		name := t.Def().Name
		if err := r.free(name); err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("tool: %q registered twice", name)
		}
		seen[name] = true
	}
	for _, t := range ts {
		r.tools[t.Def().Name] = t
	}
	return nil
}

// RegisterGroup names a group of registered tools, such as "builtin".
func (r *Registry) RegisterGroup(group string, names ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.free(group); err != nil {
		return err
	}
	for _, n := range names {
		if _, ok := r.tools[n]; !ok {
			return fmt.Errorf("tool: group %q: %w %q", group, ErrUnknownTool, n)
		}
	}
	if r.groups == nil {
		r.groups = map[string][]string{}
	}
	r.groups[group] = slices.Clone(names)
	return nil
}

func (r *Registry) free(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("tool: name %q must match %s", name, nameRE)
	}
	if _, ok := r.tools[name]; ok {
		return fmt.Errorf("tool: %q registered twice", name)
	}
	if _, ok := r.groups[name]; ok {
		return fmt.Errorf("tool: %q is already a group", name)
	}
	return nil
}

// Names lists the registered tools and groups, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.namesLocked()
}

func (r *Registry) namesLocked() []string {
	out := make([]string, 0, len(r.tools)+len(r.groups))
	for n := range r.tools {
		out = append(out, n)
	}
	for n := range r.groups {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Select returns the set of tools names ask for: tool names and group names,
// in any order, duplicates allowed. An unknown name is an error naming its
// position (tools[i]) and wrapping [ErrUnknownTool]. A nil r selects nothing
// and fails on any name.
func (r *Registry) Select(names []string) (*Set, error) {
	var picked []Tool
	seen := map[string]bool{}
	add := func(t Tool) {
		if n := t.Def().Name; !seen[n] {
			seen[n] = true
			picked = append(picked, t)
		}
	}
	if r != nil {
		r.mu.RLock()
		defer r.mu.RUnlock()
	}
	for i, n := range names {
		var t Tool
		var group []string
		var ok bool
		if r != nil {
			if t, ok = r.tools[n]; !ok {
				group, ok = r.groups[n]
			}
		}
		if !ok {
			avail := "none"
			if r != nil && (len(r.tools) > 0 || len(r.groups) > 0) {
				avail = strings.Join(r.namesLocked(), ", ")
			}
			return nil, fmt.Errorf("tools[%d]: %w %q (available: %s)", i, ErrUnknownTool, n, avail)
		}
		if t != nil {
			add(t)
			continue
		}
		for _, g := range group {
			add(r.tools[g])
		}
	}
	return NewSet(picked...)
}

// Set is the tools one agent offers its model: sorted by name, each with
// its compiled argument schema. Create it with [NewSet] or
// [Registry.Select]. A Set is immutable and safe for concurrent use; a nil
// *Set is empty.
type Set struct {
	tools   []Tool
	byName  map[string]int
	schemas []*jsonschema.Schema
	defs    []Def
}

// NewSet returns a set of ts. Duplicate names, invalid names and schemas that
// do not compile are errors naming the tool.
func NewSet(ts ...Tool) (*Set, error) {
	s := &Set{byName: map[string]int{}}
	sorted := slices.Clone(ts)
	slices.SortFunc(sorted, func(a, b Tool) int { return strings.Compare(a.Def().Name, b.Def().Name) })
	for _, t := range sorted {
		d := t.Def()
		if !nameRE.MatchString(d.Name) {
			return nil, fmt.Errorf("tool: name %q must match %s", d.Name, nameRE)
		}
		if _, dup := s.byName[d.Name]; dup {
			return nil, fmt.Errorf("tool: %q appears twice", d.Name)
		}
		sch, err := compileSchema(d.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tool %s: parameters: %w", d.Name, err)
		}
		s.byName[d.Name] = len(s.tools)
		s.tools = append(s.tools, t)
		s.schemas = append(s.schemas, sch)
		s.defs = append(s.defs, d)
	}
	return s, nil
}

// Len returns the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tools)
}

// Tools returns the tools, sorted by name; add to them with
// NewSet(append(s.Tools(), more...)...).
func (s *Set) Tools() []Tool {
	if s == nil {
		return nil
	}
	return slices.Clone(s.tools)
}

// Defs returns the tools' definitions, sorted by name.
func (s *Set) Defs() []Def {
	if s == nil {
		return nil
	}
	return slices.Clone(s.defs)
}

// Get returns the named tool.
func (s *Set) Get(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	i, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return s.tools[i], true
}

// Validate checks args against the named tool's schema. args must be a
// decoded JSON value (see [DecodeArgs]). The error explains what is wrong,
// field by field.
func (s *Set) Validate(name string, args any) error {
	i, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	if s.schemas[i] == nil {
		return nil
	}
	if err := s.schemas[i].Validate(args); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return errors.New(validationMessage(ve))
		}
		return err
	}
	return nil
}

// DecodeArgs decodes a call's raw arguments as the schema validator wants
// them (numbers kept exact). Empty or non-object arguments are errors, as
// in OpenRath.
func DecodeArgs(raw string) (any, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("arguments are empty; want a JSON object")
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("arguments must be a JSON object")
	}
	return v, nil
}

// validationMessage turns the validator's multi-line report into one line,
// leaving out the schema's internal URL.
func validationMessage(ve *jsonschema.ValidationError) string {
	lines := strings.Split(strings.TrimSpace(ve.Error()), "\n")
	if len(lines) > 1 {
		lines = lines[1:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
	}
	return "arguments do not match the schema: " + strings.Join(lines, "; ")
}

// noLoader refuses every external $ref: a tool schema is self-contained and
// must never make the worker read files or fetch URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q is not allowed", url)
}

func compileSchema(params json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(params)) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("must be a JSON object schema")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "mem:///tool.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}
