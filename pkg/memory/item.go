package memory

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Limits on what one item may hold.
const (
	MaxTextBytes      = 256 << 10 // an item's text
	MaxMetadataBytes  = 16 << 10  // its metadata, encoded as JSON
	MaxNamespaceBytes = 256
	MaxTopK           = 1000
	DefaultTopK       = 4
	DefaultNamespace  = "default"
)

// Item is one memory item.
type Item struct {
	Namespace string            `json:"namespace"`
	URI       string            `json:"uri"`
	Text      string            `json:"text"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	// VersionID is the session version whose step wrote the item ("" when
	// written outside a step, e.g. by rathctl memory remember).
	VersionID string `json:"version_id,omitempty"`
	// DeletedAt and DeletedVersionID are set on a tombstone (List with
	// IncludeDeleted, Read of a deleted item returns not_found).
	DeletedAt        time.Time `json:"deleted_at,omitzero"`
	DeletedVersionID string    `json:"deleted_version_id,omitempty"`
}

// Write is a remember request.
type Write struct {
	URI       string
	Text      string
	Metadata  map[string]string
	VersionID string
}

// Hit is one recall result.
type Hit struct {
	URI       string  `json:"uri"`
	Score     float64 `json:"score"`
	Snippet   string  `json:"snippet"`
	VersionID string  `json:"version_id,omitempty"`
}

// Query is a recall request.
type Query struct {
	Text string
	// TopK bounds the hits; 0 means DefaultTopK.
	TopK int
	// Scope restricts recall to a scope or directory ("" = the namespace).
	Scope string
}

// ListOptions selects what List returns.
type ListOptions struct {
	Scope          string
	Limit          int // 0 = no limit
	IncludeDeleted bool
}

// Store is a memory backend. Implementations are safe for concurrent use.
type Store interface {
	Remember(ctx context.Context, namespace string, w Write) (Item, error)
	Read(ctx context.Context, namespace, uri string) (Item, error)
	List(ctx context.Context, namespace string, opts ListOptions) ([]Item, error)
	// Delete leaves a tombstone recording when and by which version.
	Delete(ctx context.Context, namespace, uri, versionID string) error
	Recall(ctx context.Context, namespace string, q Query) ([]Hit, error)
	Close() error
}

// CheckNamespace validates a namespace ("" is replaced by DefaultNamespace).
func CheckNamespace(ns string) (string, error) {
	if ns == "" {
		return DefaultNamespace, nil
	}
	if len(ns) > MaxNamespaceBytes {
		return "", errorf(KindInvalidArgument, "namespace is %d bytes, over the %d-byte limit (MaxNamespaceBytes)", len(ns), MaxNamespaceBytes)
	}
	if !utf8.ValidString(ns) {
		return "", errorf(KindInvalidArgument, "namespace is not valid UTF-8")
	}
	for _, r := range ns {
		if r < 0x20 || r == 0x7f {
			return "", errorf(KindInvalidArgument, "namespace %q holds a control character", ns)
		}
	}
	return ns, nil
}

// Prepared is a validated write, ready for a backend.
type Prepared struct {
	Namespace string
	URI       string
	Text      string
	Metadata  string // JSON object
	Terms     map[string]int
	DL        int
	VersionID string
}

// Prepare validates w for namespace ns and tokenizes its text.
func Prepare(ns string, w Write) (Prepared, error) {
	ns, err := CheckNamespace(ns)
	if err != nil {
		return Prepared{}, err
	}
	u, err := ParseURI(w.URI)
	if err != nil {
		return Prepared{}, err
	}
	if len(w.Text) > MaxTextBytes {
		return Prepared{}, errorf(KindTooLarge, "item %s: text is %d bytes, over the %d-byte limit (MaxTextBytes)", w.URI, len(w.Text), MaxTextBytes)
	}
	if !utf8.ValidString(w.Text) {
		return Prepared{}, errorf(KindInvalidArgument, "item %s: text is not valid UTF-8", w.URI)
	}
	md := "{}"
	if len(w.Metadata) > 0 {
		b, err := json.Marshal(w.Metadata)
		if err != nil {
			return Prepared{}, errorf(KindInvalidArgument, "item %s: metadata: %v", w.URI, err)
		}
		if len(b) > MaxMetadataBytes {
			return Prepared{}, errorf(KindTooLarge, "item %s: metadata is %d bytes, over the %d-byte limit (MaxMetadataBytes)", w.URI, len(b), MaxMetadataBytes)
		}
		md = string(b)
	}
	if len(w.VersionID) > 64 {
		return Prepared{}, errorf(KindInvalidArgument, "item %s: version id is %d bytes, over 64", w.URI, len(w.VersionID))
	}
	terms := Tokenize(w.Text)
	tf := make(map[string]int, len(terms))
	for _, t := range terms {
		tf[t]++
	}
	return Prepared{Namespace: ns, URI: u.String(), Text: w.Text, Metadata: md, Terms: tf, DL: len(terms), VersionID: w.VersionID}, nil
}

// DecodeMetadata decodes a stored metadata JSON object.
func DecodeMetadata(s string) (map[string]string, error) {
	if s == "" || s == "{}" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, errorf(KindInternal, "stored metadata: %v", err)
	}
	return m, nil
}

// CheckQuery validates q and fills defaults; it returns the scope prefix.
func CheckQuery(q *Query) (string, error) {
	if q.TopK == 0 {
		q.TopK = DefaultTopK
	}
	if q.TopK < 0 || q.TopK > MaxTopK {
		return "", errorf(KindInvalidArgument, "top_k %d out of range 1..%d (MaxTopK)", q.TopK, MaxTopK)
	}
	if len(q.Text) > MaxTextBytes {
		return "", errorf(KindTooLarge, "query is %d bytes, over the %d-byte limit (MaxTextBytes)", len(q.Text), MaxTextBytes)
	}
	return ParseScope(q.Scope)
}
