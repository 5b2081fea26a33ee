package openrath

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/rath-run/rath/internal/jsonl"
	"github.com/rath-run/rath/pkg/session"
)

// Errors. Loaders wrap them (and [session.ErrTooLarge],
// [session.ErrInvalidChunk]) with the path and line of the problem.
var (
	// ErrFormat: the file is not a well-formed OpenRath file.
	ErrFormat = errors.New("openrath: malformed file")
	// ErrSchema: the file's schema_version is newer than this reader.
	ErrSchema = errors.New("openrath: unsupported schema_version")
	// ErrLocked: another writer holds the transcript's lock.
	ErrLocked = errors.New("openrath: transcript is locked by another writer")
	// ErrClosed: a write to a Writer that was closed or abandoned.
	ErrClosed = errors.New("openrath: writer is closed")
)

// SchemaVersion is the transcript schema this package reads and writes.
const SchemaVersion = 1

// File name suffixes of persisted transcripts.
const (
	FinalSuffix   = ".jsonl"
	PartialSuffix = ".jsonl.__partial__"
)

// Usage is OpenRath's RathLLMTokenUsage (the three counts; detail
// dictionaries are not kept).
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func (u *Usage) appendPy(b []byte) []byte {
	if u == nil {
		return append(b, "null"...)
	}
	o := newPyObject()
	o.int("prompt_tokens", u.PromptTokens)
	o.int("completion_tokens", u.CompletionTokens)
	o.int("total_tokens", u.TotalTokens)
	out, _ := o.bytes() // ints never fail
	return append(b, out...)
}

// Extra is one lineage_extras pair. Value is the JSON value as read,
// re-encoded in Python's style with its key order kept.
type Extra struct {
	Key   string
	Value json.RawMessage
}

func decodeExtras(raws []json.RawMessage) ([]Extra, error) {
	out := make([]Extra, 0, len(raws))
	for i, r := range raws {
		var pair []json.RawMessage
		if err := json.Unmarshal(r, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("lineage_extras[%d] is not a [key, value] pair", i)
		}
		var k string
		if err := json.Unmarshal(pair[0], &k); err != nil {
			return nil, fmt.Errorf("lineage_extras[%d] key is not a string", i)
		}
		v, err := appendPyRaw(nil, pair[1])
		if err != nil {
			return nil, fmt.Errorf("lineage_extras[%d] value: %w", i, err)
		}
		out = append(out, Extra{Key: k, Value: v})
	}
	return out, nil
}

func appendPyExtras(b []byte, es []Extra) ([]byte, error) {
	b = append(b, '[')
	for i, e := range es {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '[')
		b = appendPyString(b, e.Key)
		b = append(b, ", "...)
		v := e.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		var err error
		if b, err = appendPyRaw(b, v); err != nil {
			return nil, fmt.Errorf("lineage_extras %q: %w", e.Key, err)
		}
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

// SandboxSpec is OpenRath's BackendSandboxSpec. Nil fields are null.
type SandboxSpec struct {
	Image          *string           `json:"image"`
	Entrypoint     []string          `json:"entrypoint"`
	Env            map[string]string `json:"env"`
	TimeoutSeconds *float64          `json:"timeout_seconds"`
	WorkingDir     *string           `json:"working_dir"`
}

func (s *SandboxSpec) appendPy(b []byte) ([]byte, error) {
	if s == nil {
		return append(b, "null"...), nil
	}
	o := newPyObject()
	o.strPtr("image", s.Image)
	o.strs("entrypoint", s.Entrypoint)
	o.key("env")
	if s.Env == nil {
		o.b = append(o.b, "null"...)
	} else {
		// Python keeps insertion order; Go maps have none, so keys are
		// written sorted.
		env := newPyObject()
		keys := make([]string, 0, len(s.Env))
		for k := range s.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			env.str(k, s.Env[k])
		}
		eb, _ := env.bytes()
		o.b = append(o.b, eb...)
	}
	o.float("timeout_seconds", s.TimeoutSeconds)
	o.strPtr("working_dir", s.WorkingDir)
	out, err := o.bytes()
	return append(b, out...), err
}

// Header is the first record of a persisted transcript.
type Header struct {
	SchemaVersion int
	// ID is the OpenRath session id (a UUID).
	ID string
	// CreatedAt is the ISO 8601 creation time as written (Python's
	// isoformat, UTC); see [Header.Created].
	CreatedAt        string
	ParentSessionIDs []string
	LineageOperator  string
	LineageKind      string
	LineageExtras    []Extra
	SandboxBackend   *string
	SandboxSpec      *SandboxSpec
	SandboxHandleID  *string
}

// Created parses CreatedAt.
func (h *Header) Created() (time.Time, error) { return parsePyTime(h.CreatedAt) }

type headerWire struct {
	RecordType       string            `json:"record_type"`
	SchemaVersion    *int              `json:"schema_version"`
	ID               *string           `json:"id"`
	CreatedAt        *string           `json:"created_at"`
	ParentSessionIDs []string          `json:"parent_session_ids"`
	LineageOperator  *string           `json:"lineage_operator"`
	LineageKind      *string           `json:"lineage_kind"`
	LineageExtras    []json.RawMessage `json:"lineage_extras"`
	SandboxBackend   *string           `json:"sandbox_backend"`
	SandboxSpec      *SandboxSpec      `json:"sandbox_spec"`
	SandboxHandleID  *string           `json:"sandbox_handle_id"`
}

func (w *headerWire) header() (Header, error) {
	if w.ID == nil {
		return Header{}, fmt.Errorf("header has no id")
	}
	if err := checkUUID("id", *w.ID); err != nil {
		return Header{}, err
	}
	if w.CreatedAt == nil {
		return Header{}, fmt.Errorf("header has no created_at")
	}
	if _, err := parsePyTime(*w.CreatedAt); err != nil {
		return Header{}, fmt.Errorf("created_at: %w", err)
	}
	for i, p := range w.ParentSessionIDs {
		if err := checkUUID(fmt.Sprintf("parent_session_ids[%d]", i), p); err != nil {
			return Header{}, err
		}
	}
	extras, err := decodeExtras(w.LineageExtras)
	if err != nil {
		return Header{}, err
	}
	h := Header{
		SchemaVersion:    *w.SchemaVersion,
		ID:               *w.ID,
		CreatedAt:        *w.CreatedAt,
		ParentSessionIDs: w.ParentSessionIDs,
		LineageOperator:  deref(w.LineageOperator, "implicit"),
		LineageKind:      deref(w.LineageKind, "unknown"),
		LineageExtras:    extras,
		SandboxBackend:   w.SandboxBackend,
		SandboxSpec:      w.SandboxSpec,
		SandboxHandleID:  w.SandboxHandleID,
	}
	if h.ParentSessionIDs == nil {
		h.ParentSessionIDs = []string{}
	}
	return h, nil
}

func deref(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// checkUUID accepts a UUID in the canonical form Python's str(UUID) writes
// (lower-case, hyphenated), so ids round-trip as the same text. The nil
// UUID is refused: OpenRath never makes it and the graph has no such id.
func checkUUID(field, s string) error {
	u, err := uuid.Parse(s)
	if err != nil || u.String() != s {
		return fmt.Errorf("%s %q is not a canonical UUID", field, s)
	}
	if u == uuid.Nil {
		return fmt.Errorf("%s is the nil UUID", field)
	}
	return nil
}

// AppendJSON appends the header record (without a newline) as OpenRath
// writes it.
func (h *Header) appendPy(b []byte) ([]byte, error) {
	o := newPyObject()
	o.str("record_type", "header")
	o.int("schema_version", int64(h.SchemaVersion))
	o.str("id", h.ID)
	o.str("created_at", h.CreatedAt)
	parents := h.ParentSessionIDs
	if parents == nil {
		parents = []string{}
	}
	o.strs("parent_session_ids", parents)
	o.str("lineage_operator", h.LineageOperator)
	o.str("lineage_kind", h.LineageKind)
	ex, err := appendPyExtras(nil, h.LineageExtras)
	if err != nil {
		return nil, err
	}
	o.raw("lineage_extras", ex)
	o.strPtr("sandbox_backend", h.SandboxBackend)
	spec, err := h.SandboxSpec.appendPy(nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox_spec: %w", err)
	}
	o.raw("sandbox_spec", spec)
	o.strPtr("sandbox_handle_id", h.SandboxHandleID)
	out, err := o.bytes()
	return append(b, out...), err
}

// Row is one chunk record: its index and the chunk, validated as a Rath
// chunk of one of OpenRath's four kinds.
type Row struct {
	Index int
	Chunk session.Chunk
}

// openRathKind reports whether k is one of OpenRath's four chunk kinds.
func openRathKind(k session.Kind) bool {
	switch k {
	case session.KindSystem, session.KindUser, session.KindAssistant, session.KindToolResult:
		return true
	}
	return false
}

func appendPyChunkRecord(b []byte, index int, c session.Chunk) ([]byte, error) {
	if !openRathKind(c.Kind()) {
		return nil, fmt.Errorf("%w: kind %q has no OpenRath equivalent", session.ErrInvalidChunk, c.Kind())
	}
	o := newPyObject()
	o.str("record_type", "chunk")
	o.int("index", int64(index))
	o.str("kind", string(c.Kind()))
	o.rawJSON("payload", c.Payload())
	out, err := o.bytes()
	return append(b, out...), err
}

// Trailer is the last record of a closed transcript.
type Trailer struct {
	// ClosedAt is the ISO 8601 close time as written.
	ClosedAt        string
	FinalChunkCount int
	CumulativeUsage *Usage
}

func (t *Trailer) appendPy(b []byte) []byte {
	o := newPyObject()
	o.str("record_type", "trailer")
	o.str("closed_at", t.ClosedAt)
	o.int("final_chunk_count", int64(t.FinalChunkCount))
	o.raw("cumulative_usage", t.CumulativeUsage.appendPy(nil))
	out, _ := o.bytes()
	return append(b, out...)
}

type trailerWire struct {
	RecordType      string  `json:"record_type"`
	ClosedAt        *string `json:"closed_at"`
	FinalChunkCount *int    `json:"final_chunk_count"`
	CumulativeUsage *Usage  `json:"cumulative_usage"`
}

type chunkWire struct {
	RecordType string          `json:"record_type"`
	Index      *int            `json:"index"`
	Kind       *string         `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
}

// Persisted is a loaded transcript: OpenRath's PersistedSession.
type Persisted struct {
	Header Header
	Rows   []Row
	// Trailer is nil when the file has none (a partial or abandoned write).
	Trailer *Trailer
	// Path is the file it was loaded from ("" for [Read]).
	Path string
	// TornTail is the length of an unterminated last line that was dropped
	// (a write cut off by a crash), 0 when there was none.
	TornTail int
}

// Closed reports whether a trailer was seen. As in OpenRath, a file that
// has a trailer but still carries the partial suffix (a crash between the
// trailer and the rename) is closed.
func (p *Persisted) Closed() bool { return p.Trailer != nil }

// Usage is the trailer's cumulative usage: nil when there is no trailer or
// it records none.
func (p *Persisted) Usage() *Usage {
	if p.Trailer == nil {
		return nil
	}
	return p.Trailer.CumulativeUsage
}

// Chunks returns the transcript's chunks in order.
func (p *Persisted) Chunks() []session.Chunk {
	out := make([]session.Chunk, len(p.Rows))
	for i, r := range p.Rows {
		out[i] = r.Chunk
	}
	return out
}

// AgentPrompt returns the first system chunk: the agent side of OpenRath's
// to_resumable_pair (whose user side is every row, system rows included).
// Transcripts written by OpenRath's session loop have none.
func (p *Persisted) AgentPrompt() (session.Chunk, bool) {
	for _, r := range p.Rows {
		if r.Chunk.Kind() == session.KindSystem {
			return r.Chunk, true
		}
	}
	return session.Chunk{}, false
}

// WriteTo writes p in OpenRath's format: header, chunks, and the trailer
// when p has one.
func (p *Persisted) WriteTo(w io.Writer) (int64, error) {
	b, err := p.Header.appendPy(nil)
	if err != nil {
		return 0, fmt.Errorf("header: %w", err)
	}
	b = append(b, '\n')
	for i, r := range p.Rows {
		if b, err = appendPyChunkRecord(b, r.Index, r.Chunk); err != nil {
			return 0, fmt.Errorf("row %d: %w", i, err)
		}
		b = append(b, '\n')
	}
	if p.Trailer != nil {
		b = append(p.Trailer.appendPy(b), '\n')
	}
	n, err := w.Write(b)
	return int64(n), err
}

// Load reads the persisted transcript at path; see [Read].
func Load(path string) (*Persisted, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p.Path = path
	return p, nil
}

// Read reads a persisted transcript as OpenRath's load_session does: a
// header record first, chunk records, an optional trailer. An unterminated
// last line is a write cut off by a crash and is dropped (also when the cut
// falls inside a multi-byte UTF-8 character, where OpenRath 1.2.0 raises
// UnicodeDecodeError instead). Blank lines are skipped. Everything else that
// is not a well-formed transcript is an error naming the line: bad JSON or
// UTF-8, a record before the header or after the trailer, a second header
// or trailer, an unknown record_type, a newer schema_version ([ErrSchema]),
// a chunk whose index is not its position, a chunk kind other than
// OpenRath's four or a malformed payload ([session.ErrInvalidChunk]), a
// trailer whose final_chunk_count disagrees with the rows, and lines over
// [MaxLineBytes] ([session.ErrTooLarge]).
func Read(r io.Reader) (*Persisted, error) {
	lr := jsonl.NewReader(r, MaxLineBytes)
	var (
		p         Persisted
		hasHeader bool
	)
	for {
		line, terminated, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		n := lr.Line()
		if errors.Is(err, jsonl.ErrLineTooLong) {
			return nil, fmt.Errorf("line %d: %w: longer than %d bytes", n, session.ErrTooLarge, MaxLineBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: read: %w", n, err)
		}
		if !terminated {
			p.TornTail = len(line)
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !utf8.Valid(line) {
			return nil, fmt.Errorf("line %d: %w: invalid UTF-8", n, ErrFormat)
		}
		var peek struct {
			RecordType    *string `json:"record_type"`
			SchemaVersion *int    `json:"schema_version"`
		}
		if err := json.Unmarshal(line, &peek); err != nil {
			return nil, fmt.Errorf("line %d: %w: bad JSON: %w", n, ErrFormat, err)
		}
		if peek.RecordType == nil {
			return nil, fmt.Errorf("line %d: %w: no record_type", n, ErrFormat)
		}
		if p.Trailer != nil {
			return nil, fmt.Errorf("line %d: %w: %s record after the trailer", n, ErrFormat, *peek.RecordType)
		}
		switch *peek.RecordType {
		case "header":
			if hasHeader {
				return nil, fmt.Errorf("line %d: %w: duplicate header", n, ErrFormat)
			}
			switch {
			case peek.SchemaVersion == nil:
				return nil, fmt.Errorf("line %d: %w: header has no schema_version", n, ErrFormat)
			case *peek.SchemaVersion > SchemaVersion:
				return nil, fmt.Errorf("line %d: %w: schema_version %d is newer than %d", n, ErrSchema, *peek.SchemaVersion, SchemaVersion)
			case *peek.SchemaVersion < 1:
				return nil, fmt.Errorf("line %d: %w: schema_version %d", n, ErrSchema, *peek.SchemaVersion)
			}
			var w headerWire
			if err := json.Unmarshal(line, &w); err != nil {
				return nil, fmt.Errorf("line %d: %w: header: %w", n, ErrFormat, err)
			}
			h, err := w.header()
			if err != nil {
				return nil, fmt.Errorf("line %d: %w: %w", n, ErrFormat, err)
			}
			p.Header, hasHeader = h, true
		case "chunk":
			if !hasHeader {
				return nil, fmt.Errorf("line %d: %w: chunk before the header", n, ErrFormat)
			}
			var w chunkWire
			if err := json.Unmarshal(line, &w); err != nil {
				return nil, fmt.Errorf("line %d: %w: chunk: %w", n, ErrFormat, err)
			}
			switch {
			case w.Index == nil:
				return nil, fmt.Errorf("line %d: %w: chunk has no index", n, ErrFormat)
			case *w.Index != len(p.Rows):
				return nil, fmt.Errorf("line %d: %w: chunk index %d, want %d", n, ErrFormat, *w.Index, len(p.Rows))
			case w.Kind == nil:
				return nil, fmt.Errorf("line %d: %w: chunk has no kind", n, ErrFormat)
			case !openRathKind(session.Kind(*w.Kind)):
				return nil, fmt.Errorf("line %d: %w: unknown chunk kind %q", n, session.ErrInvalidChunk, *w.Kind)
			}
			c, err := session.NewChunk(session.Kind(*w.Kind), w.Payload)
			if err != nil {
				return nil, fmt.Errorf("line %d: chunk %d: %w", n, *w.Index, err)
			}
			p.Rows = append(p.Rows, Row{Index: *w.Index, Chunk: c})
		case "trailer":
			if !hasHeader {
				return nil, fmt.Errorf("line %d: %w: trailer before the header", n, ErrFormat)
			}
			var w trailerWire
			if err := json.Unmarshal(line, &w); err != nil {
				return nil, fmt.Errorf("line %d: %w: trailer: %w", n, ErrFormat, err)
			}
			if w.ClosedAt == nil || w.FinalChunkCount == nil {
				return nil, fmt.Errorf("line %d: %w: trailer needs closed_at and final_chunk_count", n, ErrFormat)
			}
			if *w.FinalChunkCount != len(p.Rows) {
				return nil, fmt.Errorf("line %d: %w: trailer final_chunk_count %d, but %d chunks were read", n, ErrFormat, *w.FinalChunkCount, len(p.Rows))
			}
			p.Trailer = &Trailer{ClosedAt: *w.ClosedAt, FinalChunkCount: *w.FinalChunkCount, CumulativeUsage: w.CumulativeUsage}
		default:
			return nil, fmt.Errorf("line %d: %w: unknown record_type %q", n, ErrFormat, *peek.RecordType)
		}
	}
	if !hasHeader {
		return nil, fmt.Errorf("%w: no header record", ErrFormat)
	}
	return &p, nil
}

// Meta describes one transcript of a sessions directory, as OpenRath's
// list_persisted_sessions does.
type Meta struct {
	ID              string
	Path            string
	CreatedAt       string
	LineageOperator string
	LineageKind     string
	ChunkCount      int
	Closed          bool
}

// Skipped is a file of a sessions directory that could not be read.
type Skipped struct {
	Path string
	Err  error
}

// LoadDir loads every transcript in dir (a <config_dir>/sessions
// directory): files named <id>.jsonl and <id>.jsonl.__partial__, the final
// file preferred when both exist. The result is sorted by created_at (then
// id). Files that cannot be read are skipped and returned in skipped, so
// one damaged file does not hide the others. err is set only when dir
// itself cannot be read.
func LoadDir(dir string) (sessions []*Persisted, skipped []Skipped, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	files := make(map[string]string) // id -> chosen file name
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		switch {
		case strings.HasSuffix(name, PartialSuffix):
			id := strings.TrimSuffix(name, PartialSuffix)
			if _, ok := files[id]; !ok {
				files[id] = name
			}
		case strings.HasSuffix(name, FinalSuffix):
			files[strings.TrimSuffix(name, FinalSuffix)] = name
		}
	}
	type loaded struct {
		p *Persisted
		t time.Time
	}
	var ok []loaded
	names := make([]string, 0, len(files))
	for _, name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		path := filepath.Join(dir, name)
		p, err := Load(path)
		if err != nil {
			skipped = append(skipped, Skipped{Path: path, Err: err})
			continue
		}
		t, _ := p.Header.Created() // validated by Read
		ok = append(ok, loaded{p: p, t: t})
	}
	slices.SortStableFunc(ok, func(a, b loaded) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		return strings.Compare(a.p.Header.ID, b.p.Header.ID)
	})
	sessions = make([]*Persisted, len(ok))
	for i, l := range ok {
		sessions[i] = l.p
	}
	return sessions, skipped, nil
}

// List is [LoadDir] reduced to each transcript's metadata, like OpenRath's
// list_persisted_sessions.
func List(dir string) ([]Meta, []Skipped, error) {
	ps, skipped, err := LoadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Meta, len(ps))
	for i, p := range ps {
		out[i] = Meta{
			ID: p.Header.ID, Path: p.Path, CreatedAt: p.Header.CreatedAt,
			LineageOperator: p.Header.LineageOperator, LineageKind: p.Header.LineageKind,
			ChunkCount: len(p.Rows), Closed: p.Closed(),
		}
	}
	return out, skipped, nil
}
