package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Kind names what a chunk holds.
type Kind string

// Chunk kinds. The first four are OpenRath's; the rest are Rath's evidence
// kinds, which record how a transcript came to be.
const (
	KindSystem     Kind = "system"
	KindUser       Kind = "user"
	KindAssistant  Kind = "assistant"
	KindToolResult Kind = "tool_result"

	// KindMemoryRecall records memories recalled into the transcript.
	KindMemoryRecall Kind = "memory_recall"
	// KindSelectorDecision records a selector's candidates, reply and choice.
	KindSelectorDecision Kind = "selector_decision"
	// KindApproval records a human decision on a tool call that needed one.
	KindApproval Kind = "approval"
	// KindReview records a human decision on an ambiguous tool call (one
	// that started and whose outcome is unknown): retry, skip or fail.
	KindReview Kind = "review"
	// KindNote is free-form evidence attached by code, never sent to a model.
	KindNote Kind = "note"
	// KindSummary is the single chunk a compressor writes.
	KindSummary Kind = "summary"
)

// Kinds lists every chunk kind, in a stable order.
func Kinds() []Kind {
	return []Kind{
		KindSystem, KindUser, KindAssistant, KindToolResult,
		KindMemoryRecall, KindSelectorDecision, KindApproval, KindNote, KindSummary, KindReview,
	}
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	for _, known := range Kinds() {
		if k == known {
			return true
		}
	}
	return false
}

// MaxChunkBytes bounds one chunk's payload. Larger payloads are refused with
// [ErrTooLarge]; tools cap their output well below it.
const MaxChunkBytes = 8 << 20

// Chunk is one immutable row of a transcript: a kind and a canonical JSON
// object payload shaped as OpenRath shapes it:
//
//	system, user:  {"content": str}
//	assistant:     {"content": str|null, "tool_calls": null|[ToolCall]}
//	tool_result:   {"tool_call_id": str, "name": str, "content": str}
//	evidence kinds: any JSON object
//
// The zero Chunk is invalid. Build chunks with [System], [User], [Assistant],
// [ToolResultChunk], [Evidence] or [NewChunk].
type Chunk struct {
	kind    Kind
	payload []byte     // canonical JSON object; never modified after construction
	red     *redaction // non-nil: a redacted chunk (payload is the marker)
}

// ToolCall is an OpenAI-shaped function call requested by an assistant.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and carries its raw JSON arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolResult is the payload of a tool_result chunk.
type ToolResult struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	// Content is JSON text, as OpenRath's loop writes it.
	Content string `json:"content"`
}

type textPayload struct {
	Content string `json:"content"`
}

type assistantPayload struct {
	Content   *string    `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls"`
}

// System returns a system chunk.
func System(text string) Chunk { return mustChunk(KindSystem, textPayload{Content: text}) }

// User returns a user chunk.
func User(text string) Chunk { return mustChunk(KindUser, textPayload{Content: text}) }

// Assistant returns an assistant chunk with text and optional tool calls.
// A tool-call-only reply (text "" and at least one call) stores a null
// content, as OpenAI and OpenRath do.
func Assistant(text string, calls ...ToolCall) Chunk {
	p := assistantPayload{}
	if text != "" || len(calls) == 0 {
		p.Content = &text
	}
	if len(calls) > 0 {
		p.ToolCalls = make([]ToolCall, len(calls))
		for i, c := range calls {
			if c.Type == "" {
				c.Type = "function"
			}
			p.ToolCalls[i] = c
		}
	}
	return mustChunk(KindAssistant, p)
}

// ToolResultChunk returns a tool_result chunk.
func ToolResultChunk(r ToolResult) Chunk { return mustChunk(KindToolResult, r) }

// Evidence returns a chunk of one of Rath's evidence kinds with body as its
// payload. body must marshal to a JSON object.
func Evidence(kind Kind, body any) (Chunk, error) {
	if !kind.Valid() || kind.modelFacing() {
		return Chunk{}, fmt.Errorf("%w: %q is not an evidence kind", ErrInvalidChunk, kind)
	}
	raw, err := marshalCanonical(body)
	if err != nil {
		return Chunk{}, fmt.Errorf("%w: %s payload: %w", ErrInvalidChunk, kind, err)
	}
	return NewChunk(kind, raw)
}

func mustChunk(kind Kind, v any) Chunk {
	raw, err := marshalCanonical(v)
	if err != nil {
		// The payload types above always marshal.
		panic(fmt.Sprintf("session: marshal %s payload: %v", kind, err))
	}
	return Chunk{kind: kind, payload: raw}
}

// NewChunk validates payload against kind's shape and returns the chunk with
// its payload in canonical form. Unknown kinds, payloads that are not JSON
// objects of the kind's shape, invalid UTF-8 and payloads over
// [MaxChunkBytes] are refused with an error wrapping [ErrInvalidChunk] or
// [ErrTooLarge].
func NewChunk(kind Kind, payload []byte) (Chunk, error) {
	if len(payload) > MaxChunkBytes {
		return Chunk{}, fmt.Errorf("%w: %s payload is %d bytes, limit %d", ErrTooLarge, kind, len(payload), MaxChunkBytes)
	}
	if !utf8.Valid(payload) {
		return Chunk{}, fmt.Errorf("%w: %s payload is not valid UTF-8", ErrInvalidChunk, kind)
	}
	var canon []byte
	var err error
	switch kind {
	case KindSystem, KindUser:
		var p textPayload
		if err = decodeStrict(payload, &p); err == nil {
			canon, err = marshalCanonical(p)
		}
	case KindAssistant:
		var p assistantPayload
		if err = decodeStrict(payload, &p); err == nil {
			for i, c := range p.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					err = fmt.Errorf("tool_calls[%d] needs an id and a function name", i)
					break
				}
			}
		}
		if err == nil {
			canon, err = marshalCanonical(p)
		}
	case KindToolResult:
		var p ToolResult
		if err = decodeStrict(payload, &p); err == nil {
			canon, err = marshalCanonical(p)
		}
	default:
		if !kind.Valid() {
			return Chunk{}, fmt.Errorf("%w: unknown kind %q", ErrInvalidChunk, kind)
		}
		canon, err = canonicalObject(payload)
		if err == nil {
			err = refuseMarker(kind, canon)
		}
	}
	if err != nil {
		return Chunk{}, fmt.Errorf("%w: %s payload: %w", ErrInvalidChunk, kind, err)
	}
	return Chunk{kind: kind, payload: canon}, nil
}

// Kind returns the chunk's kind.
func (c Chunk) Kind() Kind { return c.kind }

// Payload returns a copy of the canonical JSON payload.
func (c Chunk) Payload() json.RawMessage { return bytes.Clone(c.payload) }

// Size returns the payload's length in bytes.
func (c Chunk) Size() int { return len(c.payload) }

// IsZero reports whether c is the zero Chunk.
func (c Chunk) IsZero() bool { return c.kind == "" }

// Text returns the chunk's text: the content of a system, user or assistant
// chunk (empty for a tool-call-only reply) or the JSON body of a tool result.
// Evidence chunks return their payload.
func (c Chunk) Text() string {
	if c.red != nil {
		return RedactedText
	}
	switch c.kind {
	case KindSystem, KindUser:
		var p textPayload
		_ = json.Unmarshal(c.payload, &p)
		return p.Content
	case KindAssistant:
		var p assistantPayload
		_ = json.Unmarshal(c.payload, &p)
		if p.Content == nil {
			return ""
		}
		return *p.Content
	case KindToolResult:
		var p ToolResult
		_ = json.Unmarshal(c.payload, &p)
		return p.Content
	default:
		return string(c.payload)
	}
}

// ToolCalls returns the tool calls of an assistant chunk, or nil.
func (c Chunk) ToolCalls() []ToolCall {
	if c.kind != KindAssistant {
		return nil
	}
	if c.red != nil {
		return append([]ToolCall(nil), c.red.ToolCalls...)
	}
	var p assistantPayload
	_ = json.Unmarshal(c.payload, &p)
	return p.ToolCalls
}

// ToolResult returns the payload of a tool_result chunk.
func (c Chunk) ToolResult() (ToolResult, bool) {
	if c.kind != KindToolResult {
		return ToolResult{}, false
	}
	if c.red != nil {
		return ToolResult{ToolCallID: c.red.ToolCallID, Name: c.red.Name, Content: RedactedText}, true
	}
	var p ToolResult
	_ = json.Unmarshal(c.payload, &p)
	return p, true
}

// ModelFacing reports whether the chunk is sent to a model (OpenRath's four
// kinds and summaries); evidence kinds are kept for the record only.
func (c Chunk) ModelFacing() bool { return c.kind.modelFacing() }

func (k Kind) modelFacing() bool {
	switch k {
	case KindSystem, KindUser, KindAssistant, KindToolResult, KindSummary:
		return true
	}
	return false
}

// Hash returns the hex sha256 of the chunk's kind and canonical payload.
// A redacted chunk returns the hash its content had (see [Redact]).
func (c Chunk) Hash() string {
	if c.red != nil {
		return c.red.Hash
	}
	var sum [sha256.Size]byte
	if n := len(c.kind) + 1 + len(c.payload); n <= 512 {
		// Most chunks are short: hash them from the stack, not through a
		// digest on the heap.
		var arr [512]byte
		b := append(append(append(arr[:0], c.kind...), 0), c.payload...)
		sum = sha256.Sum256(b)
	} else {
		h := sha256.New()
		h.Write([]byte(c.kind))
		h.Write([]byte{0})
		h.Write(c.payload)
		h.Sum(sum[:0])
	}
	return hex.EncodeToString(sum[:])
}

// Equal reports whether two chunks have the same kind and payload.
func (c Chunk) Equal(o Chunk) bool { return c.kind == o.kind && bytes.Equal(c.payload, o.payload) }

// String is a one-line form for logs and debugging: "kind: text".
func (c Chunk) String() string {
	t := c.Text()
	if calls := c.ToolCalls(); len(calls) > 0 {
		names := make([]string, len(calls))
		for i, tc := range calls {
			names[i] = tc.Function.Name
		}
		t = fmt.Sprintf("%s [tool_calls: %v]", t, names)
	}
	const limit = 120
	if utf8.RuneCountInString(t) > limit {
		r := []rune(t)
		t = string(r[:limit]) + "…"
	}
	return fmt.Sprintf("%s: %s", c.kind, t)
}

type chunkJSON struct {
	Kind    Kind            `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// MarshalJSON encodes the chunk as {"kind": …, "payload": {…}}.
func (c Chunk) MarshalJSON() ([]byte, error) {
	if c.IsZero() {
		return nil, fmt.Errorf("%w: zero chunk", ErrInvalidChunk)
	}
	return marshalCanonical(chunkJSON{Kind: c.kind, Payload: c.payload})
}

// UnmarshalJSON decodes {"kind": …, "payload": {…}} and validates it with
// [NewChunk], or, for a redaction marker payload, with [ParseRedacted].
func (c *Chunk) UnmarshalJSON(b []byte) error {
	var j chunkJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidChunk, err)
	}
	if IsRedactionMarker(j.Payload) {
		// A redacted chunk read back from an API or an export. Committing
		// one stores its marker; verify reports it unless a recorded
		// redaction has its hash.
		nc, err := ParseRedacted(j.Kind, j.Payload)
		if err != nil {
			return err
		}
		*c = nc
		return nil
	}
	nc, err := NewChunk(j.Kind, j.Payload)
	if err != nil {
		return err
	}
	*c = nc
	return nil
}

// marshalCanonical encodes v as compact JSON without HTML escaping, so the
// bytes are stable and text such as "<" stays readable.
func marshalCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// trailing data.
func decodeStrict(b []byte, v any) error {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("payload must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after payload")
	}
	return nil
}

// canonicalJSON re-encodes one JSON value with sorted object keys, numbers
// kept verbatim and no insignificant whitespace. A value that is already
// canonical ([isCanonical]) is returned as it is: the result may be b.
func canonicalJSON(b []byte) ([]byte, error) {
	if isCanonical(b) {
		return b, nil
	}
	return reencodeJSON(b)
}

// reencodeJSON is canonicalJSON without the fast path: it decodes b and
// encodes it again.
func reencodeJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after value")
	}
	return marshalCanonical(v)
}

// canonicalObject is canonicalJSON for values that must be objects.
func canonicalObject(b []byte) ([]byte, error) {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("payload must be a JSON object")
	}
	if isCanonical(b) {
		return bytes.Clone(b), nil // a chunk keeps its payload: not the caller's buffer
	}
	return reencodeJSON(b)
}

// ChunkFromCanonical rebuilds a chunk from a payload already in canonical
// form, as a store reads back what [NewChunk] produced. It checks the kind,
// the size limit, UTF-8 and that the payload is a JSON object, but does not
// re-encode it: stores load transcripts of thousands of chunks and recheck
// content separately, by recomputing chunk hashes. Anything else should use
// [NewChunk]. The chunk keeps payload: the caller must not modify it.
// A redaction marker payload loads as the redacted chunk ([Redact]), whose
// hash is the one the marker keeps.
func ChunkFromCanonical(kind Kind, payload []byte) (Chunk, error) {
	switch {
	case !kind.Valid():
		return Chunk{}, fmt.Errorf("%w: unknown kind %q", ErrInvalidChunk, kind)
	case len(payload) > MaxChunkBytes:
		return Chunk{}, fmt.Errorf("%w: %s payload is %d bytes, limit %d", ErrTooLarge, kind, len(payload), MaxChunkBytes)
	case len(payload) < 2 || payload[0] != '{' || payload[len(payload)-1] != '}':
		return Chunk{}, fmt.Errorf("%w: %s payload must be a JSON object", ErrInvalidChunk, kind)
	case !utf8.Valid(payload):
		return Chunk{}, fmt.Errorf("%w: %s payload is not valid UTF-8", ErrInvalidChunk, kind)
	case IsRedactionMarker(payload):
		return ParseRedacted(kind, payload)
	}
	return Chunk{kind: kind, payload: payload}, nil
}
