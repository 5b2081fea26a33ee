package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/session"
)

// Limits on a [Call].
const (
	// MaxCandidates bounds a selector's candidates.
	MaxCandidates = 64
	// MaxDescriptionBytes bounds one candidate's description.
	MaxDescriptionBytes = 4096
	// MaxInstructionBytes bounds a compressor's instruction.
	MaxInstructionBytes = 64 << 10
	// MaxTargetBytes bounds an encoded Call.
	MaxTargetBytes = agent.MaxSpecBytes + MaxCandidates*MaxDescriptionBytes + MaxInstructionBytes + MaxVerifierCommandBytes + 4096
)

// ErrInvalidCall wraps every validation error of a [Call].
var ErrInvalidCall = errors.New("rath: invalid step call")

// Kinds lists every call kind, in a stable order.
func Kinds() []Kind { return []Kind{KindAgent, KindSelect, KindCompress, KindVerify} }

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	switch k {
	case KindAgent, KindSelect, KindCompress, KindVerify:
		return true
	}
	return false
}

// callJSON is Call as decoded: the agent is kept raw so its errors come
// from agent.ParseSpec with the field path.
type callJSON struct {
	Kind        Kind            `json:"kind"`
	Agent       json.RawMessage `json:"agent"`
	Candidates  []string        `json:"candidates"`
	Instruction string          `json:"instruction"`
	Verifier    *Verifier       `json:"verifier"`
	Branches    []session.ID    `json:"branches"`
}

// ParseTarget decodes a step job's target: a Call envelope (a JSON object
// with a "kind" field) or, as the worker has always accepted, a bare agent
// spec, which is a Call of [KindAgent]. Unknown fields are refused and the
// call is validated ([Call.Validate]); errors wrap [ErrInvalidCall] or
// [agent.ErrInvalidSpec] and name the field.
func ParseTarget(raw json.RawMessage) (Call, error) {
	if len(raw) > MaxTargetBytes {
		return Call{}, fmt.Errorf("%w: target is %d bytes, limit %d", ErrInvalidCall, len(raw), MaxTargetBytes)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return Call{}, fmt.Errorf("%w: target is empty", ErrInvalidCall)
	}
	if trimmed[0] == '{' {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &probe); err != nil {
			return Call{}, fmt.Errorf("%w: target is not a JSON object: %w", ErrInvalidCall, err)
		}
		if _, ok := probe["kind"]; ok {
			return parseEnvelope(trimmed)
		}
	}
	spec, err := agent.ParseSpec(trimmed)
	if err != nil {
		return Call{}, err
	}
	return Call{Kind: KindAgent, Agent: spec}, nil
}

func parseEnvelope(b []byte) (Call, error) {
	var j callJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Call{}, fmt.Errorf("%w: %w", ErrInvalidCall, err)
	}
	if dec.More() {
		return Call{}, fmt.Errorf("%w: trailing data after the target object", ErrInvalidCall)
	}
	if !j.Kind.Valid() {
		return Call{}, fmt.Errorf("%w: kind: %q is not one of %v", ErrInvalidCall, j.Kind, Kinds())
	}
	if a := bytes.TrimSpace(j.Agent); len(a) == 0 || bytes.Equal(a, []byte("null")) {
		return Call{}, fmt.Errorf("%w: agent: required (the agent spec, or the model and prompt of a %s call)", ErrInvalidCall, j.Kind)
	}
	spec, err := agent.ParseSpec(j.Agent)
	if err != nil {
		return Call{}, fmt.Errorf("agent: %w", err)
	}
	c := Call{Kind: j.Kind, Agent: spec, Candidates: j.Candidates, Instruction: j.Instruction, Verifier: j.Verifier, Branches: j.Branches}
	if err := c.Validate(); err != nil {
		return Call{}, err
	}
	return c, nil
}

// Validate checks the call, naming the first bad field: a known kind, a
// valid agent spec, 1..[MaxCandidates] non-blank candidates (each at most
// [MaxDescriptionBytes]) for a selector and none otherwise, and an
// instruction (at most [MaxInstructionBytes]) only for a compressor.
func (c *Call) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidCall, field, fmt.Sprintf(format, args...))
	}
	if !c.Kind.Valid() {
		return bad("kind", "%q is not one of %v", c.Kind, Kinds())
	}
	if err := c.Agent.Validate(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	switch {
	case c.Kind == KindSelect && len(c.Candidates) == 0:
		return bad("candidates", "a select call needs at least one candidate")
	case c.Kind != KindSelect && len(c.Candidates) > 0:
		return bad("candidates", "only a select call takes candidates (kind is %s)", c.Kind)
	case len(c.Candidates) > MaxCandidates:
		return bad("candidates", "%d candidates, limit %d", len(c.Candidates), MaxCandidates)
	case c.Kind != KindCompress && c.Instruction != "":
		return bad("instruction", "only a compress call takes an instruction (kind is %s)", c.Kind)
	case len(c.Instruction) > MaxInstructionBytes:
		return bad("instruction", "%d bytes, limit %d", len(c.Instruction), MaxInstructionBytes)
	case !utf8.ValidString(c.Instruction):
		return bad("instruction", "not valid UTF-8")
	case c.Kind == KindVerify && c.Verifier == nil:
		return bad("verifier", "a verify call needs a verifier (its command)")
	case c.Kind != KindVerify && c.Verifier != nil:
		return bad("verifier", "only a verify call takes a verifier (kind is %s)", c.Kind)
	case c.Kind != KindSelect && len(c.Branches) > 0:
		return bad("branches", "only a select call takes branches (kind is %s)", c.Kind)
	case len(c.Branches) > 0 && len(c.Branches) != len(c.Candidates):
		return bad("branches", "%d branches for %d candidates: give one per candidate", len(c.Branches), len(c.Candidates))
	}
	for i, b := range c.Branches {
		if b == (session.ID{}) {
			return bad(fmt.Sprintf("branches[%d]", i), "not a version id")
		}
	}
	if c.Verifier != nil {
		if err := c.Verifier.Validate(); err != nil {
			return fmt.Errorf("%w: verifier.%w", ErrInvalidCall, err)
		}
	}
	for i, d := range c.Candidates {
		field := fmt.Sprintf("candidates[%d]", i)
		switch {
		case strings.TrimSpace(d) == "":
			return bad(field, "empty description")
		case len(d) > MaxDescriptionBytes:
			return bad(field, "%d bytes, limit %d", len(d), MaxDescriptionBytes)
		case !utf8.ValidString(d):
			return bad(field, "not valid UTF-8")
		}
	}
	return nil
}
