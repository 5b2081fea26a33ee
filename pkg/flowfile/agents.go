package flowfile

import (
	"regexp"
	"strings"

	"github.com/rath-run/rath/pkg/agent"
)

// AgentCheck checks an agent's spec and returns an error whose message
// starts with the spec's field it refuses ("tools[2]: …",
// "mcp[0].command: …"), or nil.
type AgentCheck func(agent.Spec) error

// CheckAgents checks every agent's spec with check, in file order, and
// returns the first refusal as an [*Error] at the field the refusal names
// ("agents.coder.tools[2]", at that list item's line), or at the agent
// when the field cannot be located (a spec from a file).
func (f *File) CheckAgents(file string, check AgentCheck) error {
	for _, name := range f.AgentOrder {
		d := f.Agents[name]
		if d == nil {
			continue
		}
		err := check(d.Spec)
		if err == nil {
			continue
		}
		at, field, msg := position{d.Line, d.Column}, "agents."+name, err.Error()
		if path, rest, ok := strings.Cut(msg, ": "); ok && fieldPathRE.MatchString(path) {
			field, msg = field+"."+path, rest
			if n, whole := agent.SpecNode(d.spec, path); whole {
				at = position{n.Line, n.Column}
			}
		}
		return &Error{File: file, Line: at.line, Column: at.column, Field: field, Msg: msg}
	}
	return nil
}

var (
	// fieldPathRE is a spec field path: "tools[2]", "mcp[0].command".
	fieldPathRE = regexp.MustCompile(`^[a-z_]+(\[\d+\])*(\.[a-z_]+(\[\d+\])*)*$`)
)
