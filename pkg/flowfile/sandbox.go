package flowfile

import (
	"errors"
	"strings"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/sandbox/policy"
)

// SandboxCheck reports whether the operator allows a sandbox block, as
// [policy.Policy.Check] does for its placement.
type SandboxCheck func(agent.Sandbox) error

// CheckSandboxes checks every agent's sandbox block with allowed, in file
// order, and returns the first refusal as an [*Error] at the block's field
// ("agents.coder.sandbox.image", at the image's line): a refusal that is a
// [*policy.Error] names the block's field its placement field comes from.
func (f *File) CheckSandboxes(file string, allowed SandboxCheck) error {
	for _, name := range f.AgentOrder {
		d := f.Agents[name]
		if d == nil || d.Spec.Sandbox == nil {
			continue
		}
		err := allowed(*d.Spec.Sandbox)
		if err == nil {
			continue
		}
		field, msg := "agents."+name+".sandbox", err.Error()
		key := ""
		var pe *policy.Error
		if errors.As(err, &pe) {
			key, msg = sandboxKey(pe.Field), pe.Msg
			if key == "" {
				msg = pe.Field + ": " + pe.Msg
			}
		}
		at, ok := d.sandboxAt[key]
		if !ok {
			at = d.sandboxAt[""]
		}
		if key != "" {
			field += "." + key
		}
		if at == (position{}) {
			at = position{d.Line, d.Column}
		}
		return &Error{File: file, Line: at.line, Column: at.column, Field: field, Msg: msg}
	}
	return nil
}

// sandboxKey is the sandbox block's field a placement field comes from, or
// "" for a field the block cannot set.
func sandboxKey(placementField string) string {
	switch k := strings.TrimPrefix(strings.TrimPrefix(placementField, "placement."), "spec."); k {
	case "backend", "image", "network", "timeout_seconds":
		return k
	}
	return ""
}
