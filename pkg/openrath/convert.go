package openrath

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rath-run/rath/pkg/session"
)

// Format names what a session import reads.
type Format string

// The formats [Detect] tells apart.
const (
	// FormatRath is Rath's own session JSONL (docs/session-jsonl.md).
	FormatRath Format = "rath"
	// FormatTranscript is an OpenRath persisted transcript ([Read]).
	FormatTranscript Format = "openrath-transcript"
	// FormatLineage is an OpenRath lineage export ([ReadLineage]).
	FormatLineage Format = "openrath-lineage"
)

// ParseFormat parses a format name; "auto" and "" return "" (detect).
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatRath, FormatTranscript, FormatLineage:
		return f, nil
	case "auto", "":
		return "", nil
	}
	return "", fmt.Errorf("--format must be auto, %s, %s or %s, not %q", FormatRath, FormatTranscript, FormatLineage, s)
}

// ErrUnknownFormat means the input is none of the formats [Detect] knows.
var ErrUnknownFormat = errors.New("not Rath session JSONL, an OpenRath transcript or OpenRath lineage JSONL")

// maxDetectBytes bounds how much [Detect] reads before it must have seen a
// whole first record.
const maxDetectBytes = 1 << 20

// Detect reads r up to the end of its first non-blank line and tells which
// format the input is in, from that record's keys:
//
//   - "record" (Rath's header, {"record":"rath.session",…}): [FormatRath];
//   - "record_type" (OpenRath's transcript header): [FormatTranscript];
//   - "id" with "lineage_operator" or "chunk_count": [FormatLineage].
//
// It returns a reader that yields the whole input, the bytes Detect read
// included. Anything else is [ErrUnknownFormat] naming the line: not JSON,
// not an object, other keys, no record at all, or a first line longer than
// 1 MiB. Detect only classifies; the format's reader checks the rest.
func Detect(r io.Reader) (Format, io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var read bytes.Buffer
	for n := 1; ; n++ {
		line, err := readLine(br, &read)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", nil, fmt.Errorf("line %d: %w", n, err)
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
		}
		if len(bytes.TrimSpace(line)) > 0 {
			f, derr := classify(line)
			if derr != nil {
				return "", nil, fmt.Errorf("line %d: %w", n, derr)
			}
			return f, io.MultiReader(bytes.NewReader(read.Bytes()), br), nil
		}
		if errors.Is(err, io.EOF) {
			return "", nil, fmt.Errorf("%w: the input is empty", ErrUnknownFormat)
		}
	}
}

// readLine reads one line (without its newline) into read as well,
// refusing lines longer than maxDetectBytes.
func readLine(br *bufio.Reader, read *bytes.Buffer) ([]byte, error) {
	start := read.Len()
	for {
		frag, err := br.ReadSlice('\n')
		read.Write(frag)
		if read.Len()-start > maxDetectBytes {
			return nil, fmt.Errorf("%w: the first record is longer than %d bytes", ErrUnknownFormat, maxDetectBytes)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(read.Bytes()[start:], []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return read.Bytes()[start:], err
		}
	}
}

func classify(line []byte) (Format, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(line, &rec); err != nil {
		return "", fmt.Errorf("%w: not a JSON object: %w", ErrUnknownFormat, err)
	}
	has := func(k string) bool { _, ok := rec[k]; return ok }
	switch {
	case has("record"):
		return FormatRath, nil
	case has("record_type"):
		return FormatTranscript, nil
	case has("id") && (has("lineage_operator") || has("chunk_count")):
		return FormatLineage, nil
	}
	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	return "", fmt.Errorf("%w: the first record has keys [%s]; expected \"record\" (Rath), \"record_type\" (OpenRath transcript) or \"id\" and \"lineage_operator\" (OpenRath lineage)",
		ErrUnknownFormat, strings.Join(keys, " "))
}

// Converted is OpenRath sessions as Session Graph versions, ready to be
// written as session JSONL ([Converted.WriteJSONL]) and imported into any
// graph, through the coordinator's API or into a store.
type Converted struct {
	// Versions in an order where parents come first.
	Versions []*session.Version
	// Sessions holds the version of each OpenRath session, in input order.
	Sessions []*session.Version
}

// ConvertTranscripts converts transcripts as [ImportPersisted] records
// them, one root version each, with one difference: the sandbox OpenRath
// recorded (backend, spec, handle id) is kept only in the openrath.sandbox_*
// extras, not as the version's Placement. It describes where the session
// ran on the machine that wrote it (a local working directory, another
// system's sandbox handle), not where Rath should run it, and a placement
// would be checked against the operator's sandbox policy and refused.
// [PersistedOf] writes the sandbox back from the extras. A session id
// repeated with different content is [session.ErrConflict].
func ConvertTranscripts(ctx context.Context, ps []*Persisted) (*Converted, error) {
	g := session.NewMemoryGraph()
	c := &Converted{}
	for _, p := range ps {
		v, err := persistedVersion(p, false)
		if err != nil {
			return nil, err
		}
		got, err := g.Put(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", p.Header.ID, err)
		}
		c.Sessions = append(c.Sessions, got)
	}
	c.Versions = g.Versions()
	return c, nil
}

// ConvertLineage converts lineage records as [ImportLineage] records them:
// one version per record, in-file parents as graph parents.
func ConvertLineage(ctx context.Context, recs []LineageRecord) (*Converted, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: no lineage records", ErrFormat)
	}
	g := session.NewMemoryGraph()
	ss, err := ImportLineage(ctx, g, recs)
	if err != nil {
		return nil, err
	}
	c := &Converted{Versions: g.Versions(), Sessions: make([]*session.Version, len(ss))}
	for i, s := range ss {
		c.Sessions[i] = s.Version()
	}
	return c, nil
}

// WriteJSONL writes c as one session JSONL file (docs/session-jsonl.md)
// holding every version, parents first, with the last one as the head, so
// [session.Import] imports all of them or, on any error, none. The
// versions carry no key and no placement.
func (c *Converted) WriteJSONL(w io.Writer) error {
	if len(c.Versions) == 0 {
		return fmt.Errorf("%w: nothing to write", ErrFormat)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	head := c.Versions[len(c.Versions)-1].ID
	if err := enc.Encode(struct {
		Record        string     `json:"record"`
		SchemaVersion int        `json:"schema_version"`
		Head          session.ID `json:"head"`
	}{"rath.session", session.JSONLSchemaVersion, head}); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	for _, v := range c.Versions {
		cp := *v
		if cp.Parents == nil {
			cp.Parents = []session.ID{}
		}
		if cp.Chunks == nil {
			cp.Chunks = []session.Chunk{}
		}
		if err := enc.Encode(struct {
			Record string `json:"record"`
			*session.Version
		}{"version", &cp}); err != nil {
			return fmt.Errorf("write version %s: %w", v.ID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write session JSONL: %w", err)
	}
	return nil
}

// WriteTranscriptOf writes version id as an OpenRath persisted transcript
// to w, reading the version and its ancestry from jsonl, Rath session
// JSONL (a store's or the coordinator's export of id): they are imported
// into a memory graph and the transcript is built from there
// ([PersistedOf]).
func WriteTranscriptOf(ctx context.Context, id session.ID, jsonl io.Reader, w io.Writer) error {
	mg := session.NewMemoryGraph()
	if _, err := session.Import(ctx, mg, jsonl); err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	s, err := session.Open(ctx, mg, id)
	if err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	pt, err := PersistedOf(ctx, s)
	if err != nil {
		return fmt.Errorf("export %s as OpenRath: %w", id, err)
	}
	if _, err := pt.WriteTo(w); err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	return nil
}
