package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// The session endpoints (docs/api.md, "Sessions"). Every method returns
// errors that match [ErrNotFound] and [session.ErrNotFound] for a version
// the caller's tenant does not hold, and the session package's other
// errors (ErrConflict, ErrHashMismatch, …) where the coordinator reports
// them; errors.As finds the [*APIError] behind each.

func sessionPath(id session.ID, op string) string {
	p := "/v1/sessions/" + url.PathEscape(id.String())
	if op != "" {
		p += "/" + op
	}
	return p
}

// call is Do with the session errors translated.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	return translate(c.Do(ctx, method, path, body, out))
}

func (c *Client) version(ctx context.Context, method, path string, body any) (*api.Version, error) {
	var v api.Version
	if err := c.call(ctx, method, path, body, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// NewSession creates a session (POST /v1/sessions) holding req's messages:
// system, user, assistant, then req.Chunks. It returns the new root
// version.
func (c *Client) NewSession(ctx context.Context, req api.SessionRequest) (*api.Version, error) {
	return c.version(ctx, http.MethodPost, "/v1/sessions", req)
}

// GetSession returns version id with its own chunks (GET
// /v1/sessions/{id}); [Client.Transcript] returns the whole transcript.
func (c *Client) GetSession(ctx context.Context, id session.ID) (*api.Version, error) {
	return c.version(ctx, http.MethodGet, sessionPath(id, ""), nil)
}

// Transcript returns the full transcript of version id, root first (GET
// /v1/sessions/{id}/transcript). A redacted chunk is its marker.
func (c *Client) Transcript(ctx context.Context, id session.ID) (*api.Transcript, error) {
	var t api.Transcript
	if err := c.call(ctx, http.MethodGet, sessionPath(id, "transcript"), nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Ancestors returns the versions version id descends from, nearest first,
// up to depth edges away (0: no limit).
func (c *Client) Ancestors(ctx context.Context, id session.ID, depth int) (*api.Relatives, error) {
	return c.relatives(ctx, id, "ancestors", depth)
}

// Descendants returns the versions descending from version id, nearest
// first, up to depth edges away (0: no limit).
func (c *Client) Descendants(ctx context.Context, id session.ID, depth int) (*api.Relatives, error) {
	return c.relatives(ctx, id, "descendants", depth)
}

func (c *Client) relatives(ctx context.Context, id session.ID, which string, depth int) (*api.Relatives, error) {
	if depth < 0 {
		return nil, fmt.Errorf("%s of %s: depth %d: want >= 0 (0: no limit)", which, id, depth)
	}
	var rel api.Relatives
	if err := c.call(ctx, http.MethodGet, sessionPath(id, which)+"?depth="+strconv.Itoa(depth), nil, &rel); err != nil {
		return nil, err
	}
	return &rel, nil
}

// Append commits a version extending version id with req's messages (POST
// /v1/sessions/{id}/append).
func (c *Client) Append(ctx context.Context, id session.ID, req api.SessionRequest) (*api.Version, error) {
	return c.version(ctx, http.MethodPost, sessionPath(id, "append"), req)
}

// Fork commits a fork of version id (one small row, whatever its length).
func (c *Client) Fork(ctx context.Context, id session.ID) (*api.Version, error) {
	return c.version(ctx, http.MethodPost, sessionPath(id, "fork"), nil)
}

// Detach commits a new root holding version id's transcript.
func (c *Client) Detach(ctx context.Context, id session.ID) (*api.Version, error) {
	return c.version(ctx, http.MethodPost, sessionPath(id, "detach"), nil)
}

// Merge commits a version with both id and other as parents: id's
// transcript followed by other's chunks since their common base. Versions
// placed on different backends are [session.ErrIncompatiblePlacement].
func (c *Client) Merge(ctx context.Context, id, other session.ID) (*api.Version, error) {
	return c.version(ctx, http.MethodPost, sessionPath(id, "merge"), api.MergeRequest{Other: other.String()})
}

// Place commits a version (op "place") with id's transcript whose tools
// run on placement p (POST /v1/sessions/{id}/place). p.Backend is
// required; the snapshot and handle id are the worker's to set. The
// operator's sandbox policy may refuse p (a 400 naming the field).
func (c *Client) Place(ctx context.Context, id session.ID, p api.PlaceRequest) (*api.Version, error) {
	return c.version(ctx, http.MethodPost, sessionPath(id, "place"), p)
}

// listQuery encodes store.ListParams as the list endpoint's query.
func listQuery(p store.ListParams) string {
	q := url.Values{}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.RootsOnly {
		q.Set("roots", "true")
	}
	if p.Run != "" {
		q.Set("run", p.Run)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// ListSessions returns a page of versions in commit order (GET
// /v1/sessions): p.RootsOnly for sessions only, p.Run for what one run
// made; pass the page's Next as p.After for the next page.
func (c *Client) ListSessions(ctx context.Context, p store.ListParams) (*api.SessionList, error) {
	if p.Limit < 0 {
		return nil, fmt.Errorf("list sessions: limit %d: want >= 0 (0: the server's default)", p.Limit)
	}
	var page api.SessionList
	if err := c.call(ctx, http.MethodGet, "/v1/sessions"+listQuery(p), nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// ExportFormat is what [Client.Export] writes.
type ExportFormat string

// Export formats.
const (
	// ExportRath is Rath session JSONL: the version and its ancestry
	// (docs/session-jsonl.md), as GET /v1/sessions/{id}/export streams it.
	ExportRath ExportFormat = "rath"
	// ExportOpenRath is the version's transcript as an OpenRath persisted
	// transcript, built in this process from the Rath export.
	ExportOpenRath ExportFormat = "openrath"
)

// Export writes version id to w in format ("" is [ExportRath]).
// [ExportRath] streams the coordinator's session JSONL as it arrives;
// [ExportOpenRath] reads it whole first.
func (c *Client) Export(ctx context.Context, id session.ID, w io.Writer, format ExportFormat) error {
	switch format {
	case "", ExportRath:
		return translate(c.Stream(ctx, http.MethodGet, sessionPath(id, "export"), nil, "", w))
	case ExportOpenRath:
	default:
		return fmt.Errorf("export %s: format %q: want %q or %q", id, format, ExportRath, ExportOpenRath)
	}
	var buf bytes.Buffer
	if err := translate(c.Stream(ctx, http.MethodGet, sessionPath(id, "export"), nil, "", &buf)); err != nil {
		return err
	}
	return openrath.WriteTranscriptOf(ctx, id, &buf, w)
}

// Imported is what [Client.Import] stored.
type Imported struct {
	// Head is the coordinator's reply: the imported head version.
	Head api.ImportResult `json:"head"`
	// Sessions holds one version per session of the input, in input
	// order: the head alone for Rath session JSONL, each OpenRath
	// session's version otherwise.
	Sessions []store.Info `json:"sessions"`
}

// Import imports r (POST /v1/sessions/import) in format: Rath session
// JSONL ([openrath.FormatRath]), an OpenRath transcript
// ([openrath.FormatTranscript]) or OpenRath lineage JSONL
// ([openrath.FormatLineage]); "" detects it from the first record
// ([openrath.Detect]). OpenRath input is converted to session JSONL in this
// process (with no key and no placement) and sent as one body, so the
// import stores all of its versions or none. A transcript's cut-off last
// line is dropped, as OpenRath drops it.
func (c *Client) Import(ctx context.Context, r io.Reader, format openrath.Format) (*Imported, error) {
	if format == "" {
		var err error
		if format, r, err = openrath.Detect(r); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
	}
	var conv *openrath.Converted
	switch format {
	case openrath.FormatRath:
		head, err := c.importJSONL(ctx, r)
		if err != nil {
			return nil, err
		}
		return &Imported{Head: *head, Sessions: []store.Info{head.Info}}, nil
	case openrath.FormatTranscript:
		pt, err := openrath.Read(r)
		if err != nil {
			return nil, fmt.Errorf("import (%s): %w", format, err)
		}
		if conv, err = openrath.ConvertTranscripts(ctx, []*openrath.Persisted{pt}); err != nil {
			return nil, fmt.Errorf("import (%s): %w", format, err)
		}
	case openrath.FormatLineage:
		recs, err := openrath.ReadLineage(r)
		if err != nil {
			return nil, fmt.Errorf("import (%s): %w", format, err)
		}
		if conv, err = openrath.ConvertLineage(ctx, recs); err != nil {
			return nil, fmt.Errorf("import (%s): %w", format, err)
		}
	default:
		return nil, fmt.Errorf("import: format %q: want %q, %q, %q or \"\" (detect)", format, openrath.FormatRath, openrath.FormatTranscript, openrath.FormatLineage)
	}
	var body bytes.Buffer
	if err := conv.WriteJSONL(&body); err != nil {
		return nil, fmt.Errorf("import (%s): %w", format, err)
	}
	head, err := c.importJSONL(ctx, &body)
	if err != nil {
		return nil, err
	}
	out := &Imported{Head: *head, Sessions: make([]store.Info, len(conv.Sessions))}
	for i, v := range conv.Sessions {
		out.Sessions[i] = store.InfoOf(v)
	}
	return out, nil
}

// importJSONL posts a session JSONL body and decodes the imported head.
func (c *Client) importJSONL(ctx context.Context, r io.Reader) (*api.ImportResult, error) {
	var out bytes.Buffer
	if err := translate(c.Stream(ctx, http.MethodPost, "/v1/sessions/import", r, "application/x-ndjson", &out)); err != nil {
		return nil, err
	}
	var head api.ImportResult
	if err := json.Unmarshal(out.Bytes(), &head); err != nil {
		return nil, fmt.Errorf("POST /v1/sessions/import: decode reply: %w", err)
	}
	return &head, nil
}
