package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ID identifies a version. Versions get UUIDv7 ids, so ids sort by creation
// time.
type ID = uuid.UUID

// NewID returns a fresh version id.
func NewID() ID { return uuid.Must(uuid.NewV7()) }

// ParseID parses a version id, naming the input in its error.
func ParseID(s string) (ID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return ID{}, fmt.Errorf("%w: %q is not a version id (want a UUID)", ErrInvalidID, s)
	}
	return id, nil
}

// Op names the operation that made a version.
type Op string

// Operations that make versions.
const (
	OpCreate   Op = "create"
	OpAppend   Op = "append"
	OpStep     Op = "step"
	OpFork     Op = "fork"
	OpDetach   Op = "detach"
	OpMerge    Op = "merge"
	OpCompress Op = "compress"
	OpReplay   Op = "replay"
	OpImport   Op = "import"
	OpRedact   Op = "redact"
	// OpPlace moves a session to another placement ([Session.To]).
	OpPlace Op = "place"
)

// Ops lists every operation, in a stable order.
func Ops() []Op {
	return []Op{OpCreate, OpAppend, OpStep, OpFork, OpDetach, OpMerge, OpCompress, OpReplay, OpImport, OpRedact, OpPlace}
}

// Valid reports whether o is a known operation.
func (o Op) Valid() bool {
	for _, known := range Ops() {
		if o == known {
			return true
		}
	}
	return false
}

// Usage is token usage, cumulative along a transcript.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens:      u.TotalTokens + o.TotalTokens,
	}
}

// Sub returns u - o, floored at zero per field.
func (u Usage) Sub(o Usage) Usage {
	floor := func(a, b int64) int64 { return max(a-b, 0) }
	return Usage{
		PromptTokens:     floor(u.PromptTokens, o.PromptTokens),
		CompletionTokens: floor(u.CompletionTokens, o.CompletionTokens),
		TotalTokens:      floor(u.TotalTokens, o.TotalTokens),
	}
}

// IsZero reports whether no tokens are recorded.
func (u Usage) IsZero() bool { return u == Usage{} }

// Placement says where a session's tools run and where its workspace lives:
// a sandbox backend, the spec to open it with, and the content-addressed
// workspace snapshot of this version. The zero Placement means "unplaced".
type Placement struct {
	Backend  string `json:"backend,omitempty"`
	Spec     Spec   `json:"spec,omitzero"`
	Snapshot string `json:"snapshot,omitempty"`
}

// Spec is how a backend opens a sandbox. Fields a backend does not use are
// ignored by it.
type Spec struct {
	Image          string            `json:"image,omitempty"`
	Entrypoint     []string          `json:"entrypoint,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
	WorkingDir     string            `json:"working_dir,omitempty"`
	// Network is the network policy: "" or "none" for no network.
	Network string `json:"network,omitempty"`
	// HandleID names a live sandbox to reattach to, when a backend has them.
	HandleID string `json:"handle_id,omitempty"`
}

// IsZero reports whether the spec sets nothing.
func (s Spec) IsZero() bool {
	return s.Image == "" && len(s.Entrypoint) == 0 && len(s.Env) == 0 && s.TimeoutSeconds == 0 &&
		s.WorkingDir == "" && s.Network == "" && s.HandleID == ""
}

// Producer records who made a version. Empty fields are unknown.
type Producer struct {
	Run    string `json:"run,omitempty"`
	Step   string `json:"step,omitempty"`
	Agent  string `json:"agent,omitempty"`
	Model  string `json:"model,omitempty"`
	Worker string `json:"worker,omitempty"`
	// TraceID links the version to its trace, when one was recorded.
	TraceID string `json:"trace_id,omitempty"`
}

// Extra is one free-form lineage annotation (OpenRath's lineage_extras),
// encoded as a two-element JSON array [key, value].
type Extra struct {
	Key   string
	Value json.RawMessage
}

// StringExtra returns an Extra whose value is a JSON string.
func StringExtra(key, value string) Extra {
	return Extra{Key: key, Value: appendCanonicalString(nil, value)}
}

// UsagesExtra returns an Extra whose value is the usages as a JSON array,
// already canonical (keys in order), so Seal keeps it as it is instead of
// decoding and encoding it again (a step's round usage, issue 25).
func UsagesExtra(key string, us []Usage) Extra {
	if us == nil {
		return Extra{Key: key, Value: json.RawMessage("null")}
	}
	b := make([]byte, 0, 2+len(us)*72)
	b = append(b, '[')
	for i, u := range us {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"completion_tokens":`...)
		b = strconv.AppendInt(b, u.CompletionTokens, 10)
		b = append(b, `,"prompt_tokens":`...)
		b = strconv.AppendInt(b, u.PromptTokens, 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, u.TotalTokens, 10)
		b = append(b, '}')
	}
	return Extra{Key: key, Value: append(b, ']')}
}

// MarshalJSON encodes the extra as [key, value].
func (e Extra) MarshalJSON() ([]byte, error) {
	v := e.Value
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	return marshalCanonical([]any{e.Key, v})
}

// UnmarshalJSON decodes [key, value].
func (e *Extra) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return fmt.Errorf("extra must be a [key, value] array: %w", err)
	}
	if len(pair) != 2 {
		return fmt.Errorf("extra must be a [key, value] array, got %d elements", len(pair))
	}
	if err := json.Unmarshal(pair[0], &e.Key); err != nil {
		return fmt.Errorf("extra key must be a string: %w", err)
	}
	v, err := canonicalJSON(pair[1])
	if err != nil {
		return fmt.Errorf("extra %q value: %w", e.Key, err)
	}
	e.Value = v
	return nil
}

// canonicalExtras returns es with every value in canonical JSON (sorted
// keys, no insignificant whitespace, no HTML escaping; an empty value is
// null), so a version's hash survives a JSON round trip through a store or
// an export. es itself is not modified: a new slice is returned when a value
// changes.
func canonicalExtras(id ID, es []Extra) ([]Extra, error) {
	if len(es) == 0 {
		// nil, not empty: a version's JSON omits both, so a hash over
		// "extras":[] could not be checked once the version crossed the
		// API (POST /v1/versions) or an export.
		return nil, nil
	}
	var out []Extra
	for i, e := range es {
		if !utf8.ValidString(e.Key) {
			return nil, fmt.Errorf("%w: version %s: extra key %q is not valid UTF-8", ErrInvalidVersion, id, e.Key)
		}
		v := e.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		c, err := canonicalJSON(v)
		if err != nil {
			return nil, fmt.Errorf("%w: version %s: extra %q: value is not JSON: %w", ErrInvalidVersion, id, e.Key, err)
		}
		if out == nil && !bytes.Equal(c, e.Value) {
			out = slices.Clone(es)
		}
		if out != nil {
			out[i].Value = c
		}
	}
	if out == nil {
		return es, nil
	}
	return out, nil
}

// Version is one immutable node of the Session Graph. Once a Version has been
// put into a [Graph] it must not be modified; graphs and caches share it.
type Version struct {
	ID ID `json:"id"`
	// Parents are the lineage parents, in order: none for a root, one
	// normally, two or more for a merge.
	Parents []ID `json:"parents"`
	// Base is the version whose transcript this one extends, or nil when the
	// transcript is Chunks alone. It is Parents[0] except for detach and
	// compress (see the package documentation).
	Base *ID `json:"base,omitempty"`
	Op   Op  `json:"op"`
	// Chunks are the chunks this version appends to its base's transcript.
	Chunks []Chunk `json:"chunks"`
	// Len is the length of the full transcript: Base's Len + len(Chunks).
	Len       int       `json:"len"`
	Placement Placement `json:"placement,omitzero"`
	Usage     Usage     `json:"usage"`
	Producer  Producer  `json:"producer,omitzero"`
	Extras    []Extra   `json:"extras,omitempty"`
	// Key makes a commit idempotent: a second put with the same key returns
	// the version already committed when it replays the same commit, and
	// is ErrConflict otherwise ([KeyedReplay]). Steps use their step id.
	Key       string    `json:"key,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Hash is the hex sha256 over the parents' and base's hashes and this
	// version's own content; see [Version.ComputeHash].
	Hash string `json:"hash"`
}

// hashInput is the canonical encoding a version's hash covers. Field order is
// part of the format: changing it changes every hash.
type hashInput struct {
	Format       string    `json:"format"`
	ID           ID        `json:"id"`
	ParentHashes []string  `json:"parent_hashes"`
	BaseHash     string    `json:"base_hash"`
	Op           Op        `json:"op"`
	ChunkHashes  []string  `json:"chunk_hashes"`
	Len          int       `json:"len"`
	Placement    Placement `json:"placement"`
	Usage        Usage     `json:"usage"`
	Producer     Producer  `json:"producer"`
	Extras       []Extra   `json:"extras"`
	Key          string    `json:"key"`
	CreatedAt    string    `json:"created_at"`
}

const hashFormat = "rath.version.v1"

// ComputeHash returns the hash v should carry given the hashes of its parents
// (in order) and of its base ("" when it has none).
func (v *Version) ComputeHash(parentHashes []string, baseHash string) string {
	in := hashInput{
		Format:       hashFormat,
		ID:           v.ID,
		ParentHashes: parentHashes,
		BaseHash:     baseHash,
		Op:           v.Op,
		ChunkHashes:  make([]string, len(v.Chunks)),
		Len:          v.Len,
		Placement:    v.Placement,
		Usage:        v.Usage,
		Producer:     v.Producer,
		Extras:       v.Extras,
		Key:          v.Key,
		CreatedAt:    v.CreatedAt.UTC().Format(time.RFC3339Nano),
	}
	if in.ParentHashes == nil {
		in.ParentHashes = []string{}
	}
	for i, c := range v.Chunks {
		in.ChunkHashes[i] = c.Hash()
	}
	h, err := hashOf(&in)
	if err != nil {
		panic(fmt.Sprintf("session: encode hash input: %v", err)) // plain data always encodes
	}
	return h
}

// Validate checks the version's own fields (not its links): a known op, valid
// chunks, a consistent length and the base/parent shape its op requires.
func (v *Version) Validate() error {
	if v.ID == (ID{}) {
		return fmt.Errorf("%w: version has no id", ErrInvalidVersion)
	}
	if !v.Op.Valid() {
		return fmt.Errorf("%w: version %s: unknown op %q", ErrInvalidVersion, v.ID, v.Op)
	}
	for i, c := range v.Chunks {
		if c.IsZero() {
			return fmt.Errorf("%w: version %s: chunk %d is empty", ErrInvalidVersion, v.ID, i)
		}
	}
	seen := make(map[ID]bool, len(v.Parents))
	for _, p := range v.Parents {
		if p == v.ID {
			return fmt.Errorf("%w: version %s is its own parent", ErrCycle, v.ID)
		}
		if seen[p] {
			return fmt.Errorf("%w: version %s lists parent %s twice", ErrInvalidVersion, v.ID, p)
		}
		seen[p] = true
	}
	for _, e := range v.Extras {
		if !utf8.ValidString(e.Key) {
			return fmt.Errorf("%w: version %s: extra key %q is not valid UTF-8", ErrInvalidVersion, v.ID, e.Key)
		}
		if c, err := canonicalJSON(e.Value); err != nil || !bytes.Equal(c, e.Value) {
			return fmt.Errorf("%w: version %s: extra %q value %q is not canonical JSON (sorted keys, no spaces): seal the version to canonicalise it", ErrInvalidVersion, v.ID, e.Key, e.Value)
		}
	}
	if v.Base != nil && *v.Base == v.ID {
		return fmt.Errorf("%w: version %s is its own base", ErrCycle, v.ID)
	}
	if v.Base == nil && v.Len != len(v.Chunks) {
		return fmt.Errorf("%w: version %s has no base, so len must be %d, not %d", ErrInvalidVersion, v.ID, len(v.Chunks), v.Len)
	}
	if v.Len < len(v.Chunks) {
		return fmt.Errorf("%w: version %s: len %d is shorter than its own %d chunks", ErrInvalidVersion, v.ID, v.Len, len(v.Chunks))
	}
	switch v.Op {
	case OpMerge:
		if len(v.Parents) < 2 {
			return fmt.Errorf("%w: merge %s needs 2+ parents, has %d", ErrInvalidVersion, v.ID, len(v.Parents))
		}
	case OpFork, OpAppend, OpStep, OpPlace, OpCompress, OpReplay, OpRedact:
		if len(v.Parents) == 0 {
			return fmt.Errorf("%w: %s %s needs a parent", ErrInvalidVersion, v.Op, v.ID)
		}
	case OpCreate, OpDetach:
		if len(v.Parents) != 0 {
			return fmt.Errorf("%w: %s %s must be a root", ErrInvalidVersion, v.Op, v.ID)
		}
	}
	return nil
}
