package session

import (
	"bytes"
	"encoding/hex"
	"fmt"
)

// RedactedText is what a redacted chunk's Text returns, and so what a model
// is sent in place of a redacted system, user, assistant or tool result.
const RedactedText = "[redacted]"

// redactedPrefix starts every redaction marker payload. No payload
// [NewChunk] accepts starts with it: the four OpenRath kinds refuse unknown
// fields, and evidence payloads with the key are refused.
const redactedPrefix = `{"rath_redacted":`

// redaction is what a redacted chunk keeps: the original hash, the reason,
// and for tool calls and results only the ids and names that pair them, so
// the transcript stays a valid conversation for a model.
type redaction struct {
	Hash       string     `json:"hash"`
	Name       string     `json:"name,omitempty"`
	Reason     string     `json:"reason"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
}

type redactedPayload struct {
	R redaction `json:"rath_redacted"`
}

// Redact returns the redacted form of c: the same kind and hash, with the
// payload replaced by the marker
//
//	{"rath_redacted":{"hash":…,"reason":…}}
//
// which keeps, for an assistant chunk, its tool calls' ids and function
// names (arguments become "{}") and, for a tool result, its call id and
// tool name. Its [Chunk.Hash] is c's, so every version hash over it still
// verifies. Redacting a redacted chunk returns it unchanged.
func Redact(c Chunk, reason string) (Chunk, error) {
	if c.IsZero() {
		return Chunk{}, fmt.Errorf("%w: redact a zero chunk", ErrInvalidChunk)
	}
	if c.Redacted() {
		return c, nil
	}
	r := redaction{Hash: c.Hash(), Reason: reason}
	switch c.kind {
	case KindAssistant:
		for _, tc := range c.ToolCalls() {
			r.ToolCalls = append(r.ToolCalls, ToolCall{ID: tc.ID, Type: tc.Type, Function: FunctionCall{Name: tc.Function.Name, Arguments: "{}"}})
		}
	case KindToolResult:
		tr, _ := c.ToolResult()
		r.ToolCallID, r.Name = tr.ToolCallID, tr.Name
	}
	return redacted(c.kind, r)
}

// redacted builds a redacted chunk from its parts; see [Redact].
func redacted(kind Kind, r redaction) (Chunk, error) {
	if !kind.Valid() {
		return Chunk{}, fmt.Errorf("%w: unknown kind %q", ErrInvalidChunk, kind)
	}
	if b, err := hex.DecodeString(r.Hash); err != nil || len(b) != 32 {
		return Chunk{}, fmt.Errorf("%w: redacted %s chunk: hash %q is not 64 hex digits", ErrInvalidChunk, kind, r.Hash)
	}
	raw, err := marshalCanonical(redactedPayload{R: r})
	if err != nil {
		return Chunk{}, fmt.Errorf("%w: redacted %s payload: %w", ErrInvalidChunk, kind, err)
	}
	rr := r
	return Chunk{kind: kind, payload: raw, red: &rr}, nil
}

// ParseRedacted reads a stored redaction marker payload (as a store loads
// it) into the redacted chunk, which keeps the original hash. The payload
// must be exactly the canonical marker [Redact] writes.
func ParseRedacted(kind Kind, payload []byte) (Chunk, error) {
	var p redactedPayload
	if err := decodeStrict(payload, &p); err != nil {
		return Chunk{}, fmt.Errorf("%w: redacted %s payload: %w", ErrInvalidChunk, kind, err)
	}
	c, err := redacted(kind, p.R)
	if err != nil {
		return Chunk{}, err
	}
	if !bytes.Equal(c.payload, payload) {
		return Chunk{}, fmt.Errorf("%w: redacted %s payload is not canonical", ErrInvalidChunk, kind)
	}
	return c, nil
}

// IsRedactionMarker reports whether payload has the form of a redaction
// marker (it may still be malformed).
func IsRedactionMarker(payload []byte) bool { return bytes.HasPrefix(payload, []byte(redactedPrefix)) }

// Redacted reports whether the chunk's content was removed by a redaction.
func (c Chunk) Redacted() bool { return c.red != nil }

// RedactionReason returns why the chunk was redacted ("" when it was not).
func (c Chunk) RedactionReason() string {
	if c.red == nil {
		return ""
	}
	return c.red.Reason
}

// refuseMarker refuses evidence payloads that would read back as a
// redaction marker.
func refuseMarker(kind Kind, canon []byte) error {
	if IsRedactionMarker(canon) {
		return fmt.Errorf("%w: %s payload: the key rath_redacted is reserved for redactions", ErrInvalidChunk, kind)
	}
	return nil
}
