package trainset

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Source is what an export reads: a store, or a coordinator's view of one.
type Source interface {
	List(ctx context.Context, p store.ListParams) (store.Page, error)
	Children(ctx context.Context, id session.ID) ([]store.Info, error)
	Get(ctx context.Context, id session.ID) (*session.Version, error)
	CommonBase(ctx context.Context, a, b session.ID) (session.ID, bool, error)
	Transcript(ctx context.Context, id session.ID) ([]session.Chunk, error)
}

// Format names a record format.
type Format string

// Record formats.
const (
	// FormatOpenAI is the OpenAI fine-tuning chat format: {"messages",
	// "tools", "provenance"}.
	FormatOpenAI Format = "openai"
	// FormatOpenRath is OpenRath's trajectory shape: the transcript's rows as
	// OpenRath persists them ({"kind", "payload"}), with the provenance.
	FormatOpenRath Format = "openrath"
)

// ParseFormat parses a --format value ("" is [FormatOpenAI]).
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", FormatOpenAI:
		return FormatOpenAI, nil
	case FormatOpenRath:
		return FormatOpenRath, nil
	}
	return "", fmt.Errorf("format %q: want %q or %q", s, FormatOpenAI, FormatOpenRath)
}

// Redacted says what a redacted chunk does to its record.
type Redacted string

// Redaction policies.
const (
	DropRecord Redacted = "drop-record"
	DropChunk  Redacted = "drop-chunk"
)

// ParseRedacted parses a --redacted value ("" is [DropRecord]).
func ParseRedacted(s string) (Redacted, error) {
	switch Redacted(s) {
	case "", DropRecord:
		return DropRecord, nil
	case DropChunk:
		return DropChunk, nil
	}
	return "", fmt.Errorf("redacted %q: want %q or %q", s, DropRecord, DropChunk)
}

// Selector chooses versions. Zero fields match everything.
type Selector struct {
	Run   string    `json:"run,omitempty"`
	Agent string    `json:"agent,omitempty"`
	Since time.Time `json:"since,omitzero"` // created at or after
	Until time.Time `json:"until,omitzero"` // created before
}

// Match reports whether the selector keeps a version.
func (s Selector) Match(v store.Info) bool {
	if s.Run != "" && v.Producer.Run != s.Run {
		return false
	}
	if s.Agent != "" && v.Producer.Agent != s.Agent {
		return false
	}
	if !s.Since.IsZero() && v.CreatedAt.Before(s.Since) {
		return false
	}
	if !s.Until.IsZero() && !v.CreatedAt.Before(s.Until) {
		return false
	}
	return true
}

// Options configure [Export].
type Options struct {
	Format   Format
	Redacted Redacted
	// Tools are the JSON schemas of the tools the agent was offered
	// (OpenAI "tools" entries), written into every OpenAI record.
	Tools []json.RawMessage
	// After is a record's cursor: the export resumes after that record.
	After string
	// Filter, when set, further tests every trajectory end ([SQLFilter]).
	Filter Filter
	// PageSize is how many version headers are read at a time (0: 500).
	PageSize int
	// Progress, when set, is called after every page.
	Progress func(Stats)
}

// Stats counts an export's progress.
type Stats struct {
	Scanned  int    `json:"scanned"`  // version headers read
	Written  int    `json:"written"`  // records written
	Skipped  int    `json:"skipped"`  // selected ends that made no record
	Redacted int    `json:"redacted"` // records dropped for a redaction
	Cursor   string `json:"cursor,omitempty"`
}

// Provenance says where a record came from.
type Provenance struct {
	VersionID session.ID    `json:"version_id"`
	Hash      string        `json:"hash"`
	Run       string        `json:"run,omitempty"`
	Step      string        `json:"step,omitempty"`
	Agent     string        `json:"agent,omitempty"`
	Model     string        `json:"model,omitempty"`
	Usage     session.Usage `json:"usage"`
	CreatedAt time.Time     `json:"created_at"`
	// Cursor resumes an export after this record ([Options.After]).
	Cursor string `json:"cursor,omitempty"`
}

// ProvenanceOf returns v's provenance (without a cursor).
func ProvenanceOf(v store.Info) Provenance {
	return Provenance{
		VersionID: v.ID, Hash: v.Hash, Run: v.Producer.Run, Step: v.Producer.Step,
		Agent: v.Producer.Agent, Model: v.Producer.Model, Usage: v.Usage, CreatedAt: v.CreatedAt,
	}
}

// cursor is "t1:" page-cursor ":" version-id, base64url.
func encodeCursor(page string, id session.ID) string {
	return base64.RawURLEncoding.EncodeToString([]byte("t1:" + page + ":" + id.String()))
}

// DecodeCursor parses a record cursor into the list cursor of its page and
// its version id.
func DecodeCursor(c string) (page string, id session.ID, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		s, ok := strings.CutPrefix(string(raw), "t1:")
		i := strings.LastIndexByte(s, ':')
		if ok && i >= 0 {
			if id, perr := uuid.Parse(s[i+1:]); perr == nil {
				return s[:i], id, nil
			}
		}
	}
	return "", session.ID{}, fmt.Errorf("after: cursor %q is not one an export wrote", c)
}

// Export writes one record per selected trajectory to w and returns what
// it did. It stops at the first error, with every record before it
// written whole; the last record's cursor resumes it.
func Export(ctx context.Context, src Source, sel Selector, opts Options, w io.Writer) (Stats, error) {
	var st Stats
	if opts.Format == "" {
		opts.Format = FormatOpenAI
	}
	if opts.Redacted == "" {
		opts.Redacted = DropRecord
	}
	if _, err := ParseFormat(string(opts.Format)); err != nil {
		return st, err
	}
	if _, err := ParseRedacted(string(opts.Redacted)); err != nil {
		return st, err
	}
	limit := opts.PageSize
	if limit <= 0 {
		limit = 500
	}
	after, skipTo := "", session.ID{}
	resuming := false
	if opts.After != "" {
		var err error
		if after, skipTo, err = DecodeCursor(opts.After); err != nil {
			return st, err
		}
		resuming = true
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	for {
		page, err := src.List(ctx, store.ListParams{Limit: limit, After: after, Run: sel.Run})
		if err != nil {
			return st, fmt.Errorf("export: list versions: %w", err)
		}
		for _, v := range page.Versions {
			st.Scanned++
			if resuming {
				if v.ID == skipTo {
					resuming = false
				}
				continue
			}
			if !sel.Match(v) {
				continue
			}
			if lbl, err := isLabelVersion(ctx, src, v.ID, v.OwnChunks); err != nil || lbl {
				if err != nil {
					return st, err
				}
				continue
			}
			end, err := isEnd(ctx, src, sel, v)
			if err != nil {
				return st, err
			}
			if !end {
				continue
			}
			if opts.Filter != nil {
				keep, err := opts.Filter(ctx, v)
				if err != nil {
					return st, err
				}
				if !keep {
					continue
				}
			}
			cur := encodeCursor(after, v.ID)
			line, why, err := record(ctx, src, v, cur, opts)
			if err != nil {
				return st, err
			}
			switch why {
			case "":
				if _, err := bw.Write(line); err != nil {
					return st, fmt.Errorf("export: write: %w", err)
				}
				st.Written++
				st.Cursor = cur
			case skipRedacted:
				st.Redacted++
			default:
				st.Skipped++
			}
		}
		if resuming {
			return st, fmt.Errorf("after: the cursor's version %s is not where the cursor says (was it written by another selection?)", skipTo)
		}
		if err := bw.Flush(); err != nil {
			return st, fmt.Errorf("export: write: %w", err)
		}
		if opts.Progress != nil {
			opts.Progress(st)
		}
		if page.Next == "" {
			return st, nil
		}
		after = page.Next
	}
}

// isEnd reports whether no selected child extends v.
func isEnd(ctx context.Context, src Source, sel Selector, v store.Info) (bool, error) {
	kids, err := src.Children(ctx, v.ID)
	if err != nil {
		return false, fmt.Errorf("export: children of %s: %w", v.ID, err)
	}
	for _, k := range kids {
		if k.Base != nil && *k.Base == v.ID && sel.Match(k) {
			lbl, err := isLabelVersion(ctx, src, k.ID, k.OwnChunks)
			if err != nil {
				return false, err
			}
			if !lbl {
				return false, nil
			}
		}
	}
	return true, nil
}

const (
	skipRedacted = "redacted"
	skipNoReply  = "no assistant reply at the end"
)

// record builds v's JSONL line (with its newline), or says why it has none.
func record(ctx context.Context, src Source, v store.Info, cursor string, opts Options) ([]byte, string, error) {
	chunks, err := src.Transcript(ctx, v.ID)
	if err != nil {
		return nil, "", fmt.Errorf("export: transcript of %s: %w", v.ID, err)
	}
	prov := ProvenanceOf(v)
	prov.Cursor = cursor
	msgs, why := Messages(chunks, opts.Redacted)
	if why != "" {
		return nil, why, nil
	}
	var rec any
	switch opts.Format {
	case FormatOpenRath:
		rec = openRathRecord(chunks, opts.Redacted, prov)
	default:
		rec = OpenAIRecord{Messages: msgs, Tools: opts.Tools, Provenance: prov}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, "", fmt.Errorf("export: encode %s: %w", v.ID, err)
	}
	return append(b, '\n'), "", nil
}
