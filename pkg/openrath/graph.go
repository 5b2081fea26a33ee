package openrath

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/rath-run/rath/pkg/session"
)

// Extra keys under which imports keep what OpenRath recorded.
const (
	ExtraSource           = "openrath.source" // "persisted" or "lineage"
	ExtraParentSessionIDs = "openrath.parent_session_ids"
	ExtraDanglingParents  = "openrath.dangling_parent_ids"
	ExtraOperator         = "openrath.lineage_operator"
	ExtraKind             = "openrath.lineage_kind"
	ExtraLineageExtras    = "openrath.lineage_extras"
	ExtraChunkCount       = "openrath.chunk_count"
	ExtraUsage            = "openrath.cumulative_usage"
	ExtraCreatedAt        = "openrath.created_at"
	ExtraSandboxBackend   = "openrath.sandbox_backend"
	ExtraSandboxSpec      = "openrath.sandbox_spec"
	ExtraSandboxHandleID  = "openrath.sandbox_handle_id"
	ExtraTrailer          = "openrath.trailer"
	ExtraOp               = "openrath.op"
)

// MapOperator maps an OpenRath lineage_operator to the Rath operation that
// does the same thing, and false for operators Rath has no equivalent of.
func MapOperator(operator string) (session.Op, bool) {
	switch operator {
	case "Session.fork", "fork_session":
		return session.OpFork, true
	case "Session.detach", "detach_session":
		return session.OpDetach, true
	case "Session.merge":
		return session.OpMerge, true
	case "run_session_loop":
		return session.OpStep, true
	case "run_session_compress":
		return session.OpCompress, true
	case "Session.create", "create_user_session", "create_system_session", "implicit":
		return session.OpCreate, true
	}
	return "", false
}

// fitOp returns op when a version with n graph parents may carry it, and
// OpImport otherwise (a fork whose parent is not in the file, say).
func fitOp(op session.Op, ok bool, n int) session.Op {
	if !ok {
		return session.OpImport
	}
	switch op {
	case session.OpCreate, session.OpDetach:
		if n == 0 {
			return op
		}
	case session.OpMerge:
		if n >= 2 {
			return op
		}
	default:
		if n >= 1 {
			return op
		}
	}
	return session.OpImport
}

func newExtra(key string, v any) (session.Extra, error) {
	b, err := json.Marshal([]any{key, v})
	if err != nil {
		return session.Extra{}, fmt.Errorf("extra %s: %w", key, err)
	}
	var e session.Extra
	if err := json.Unmarshal(b, &e); err != nil { // canonicalises the value
		return session.Extra{}, fmt.Errorf("extra %s: %w", key, err)
	}
	return e, nil
}

type extraList struct {
	out []session.Extra
	err error
}

func (l *extraList) add(key string, v any) {
	if l.err != nil {
		return
	}
	e, err := newExtra(key, v)
	if err != nil {
		l.err = err
		return
	}
	l.out = append(l.out, e)
}

func pyExtrasJSON(es []Extra) json.RawMessage {
	pairs := make([]any, len(es))
	for i, e := range es {
		v := e.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		pairs[i] = []any{e.Key, v}
	}
	b, _ := json.Marshal(pairs)
	return b
}

func usageOf(u *Usage) session.Usage {
	if u == nil {
		return session.Usage{}
	}
	return session.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

func placementOf(h *Header) session.Placement {
	var p session.Placement
	if h.SandboxBackend != nil {
		p.Backend = *h.SandboxBackend
	}
	if s := h.SandboxSpec; s != nil {
		p.Spec = session.Spec{
			Image: deref(s.Image, ""), Entrypoint: slices.Clone(s.Entrypoint), Env: maps.Clone(s.Env),
			WorkingDir: deref(s.WorkingDir, ""),
		}
		if s.TimeoutSeconds != nil {
			p.Spec.TimeoutSeconds = *s.TimeoutSeconds
		}
	}
	if h.SandboxHandleID != nil {
		p.Spec.HandleID = *h.SandboxHandleID
	}
	return p
}

// ImportPersisted records p in g as one root version (op import) holding
// its rows, and returns it. The version id is the OpenRath session id, so
// importing the same file again is a no-op, and importing a different file
// with the same id (a partial that has since grown) is [session.ErrConflict].
//
// Nothing OpenRath recorded is lost: the sandbox backend, spec and handle
// id become the Placement (handle id as Spec.HandleID); usage comes from the
// trailer; created_at becomes CreatedAt; parents, operator, kind, extras,
// the raw sandbox fields and the trailer are kept as "openrath.*" Extras
// (see the Extra* constants), with the Rath op the operator maps to under
// [ExtraOp]. OpenRath parents are not graph parents: a transcript file
// holds full rows, not a delta, and its parents are usually not in g.
func ImportPersisted(ctx context.Context, g session.Graph, p *Persisted) (session.Session, error) {
	v, err := persistedVersion(p, true)
	if err != nil {
		return session.Session{}, err
	}
	got, err := g.Put(ctx, v)
	if err != nil {
		return session.Session{}, fmt.Errorf("import %s: %w", p.Header.ID, err)
	}
	return session.Wrap(g, got), nil
}

// persistedVersion returns p as one sealed root version (see
// [ImportPersisted]); with placed false the sandbox fields are kept only as
// extras and the version has no Placement.
func persistedVersion(p *Persisted, placed bool) (*session.Version, error) {
	h := &p.Header
	id, err := uuid.Parse(h.ID)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w: %w", h.ID, ErrFormat, err)
	}
	created, err := h.Created()
	if err != nil {
		return nil, fmt.Errorf("import %s: %w: %w", h.ID, ErrFormat, err)
	}
	var l extraList
	l.add(ExtraSource, "persisted")
	l.add(ExtraParentSessionIDs, nonNil(h.ParentSessionIDs))
	l.add(ExtraOperator, h.LineageOperator)
	l.add(ExtraKind, h.LineageKind)
	l.add(ExtraLineageExtras, pyExtrasJSON(h.LineageExtras))
	if op, ok := MapOperator(h.LineageOperator); ok {
		l.add(ExtraOp, string(op))
	}
	l.add(ExtraCreatedAt, h.CreatedAt)
	l.add(ExtraSandboxBackend, h.SandboxBackend)
	l.add(ExtraSandboxSpec, h.SandboxSpec)
	l.add(ExtraSandboxHandleID, h.SandboxHandleID)
	if t := p.Trailer; t != nil {
		l.add(ExtraTrailer, map[string]any{"closed_at": t.ClosedAt, "final_chunk_count": t.FinalChunkCount, "cumulative_usage": t.CumulativeUsage})
	} else {
		l.add(ExtraTrailer, nil)
	}
	l.add(ExtraUsage, p.Usage())
	if l.err != nil {
		return nil, fmt.Errorf("import %s: %w", h.ID, l.err)
	}
	v := &session.Version{
		ID:        id,
		Op:        session.OpImport,
		Chunks:    p.Chunks(),
		Usage:     usageOf(p.Usage()),
		Extras:    l.out,
		CreatedAt: created,
	}
	if placed {
		v.Placement = placementOf(h)
	}
	if err := session.Seal(v, nil, nil); err != nil {
		return nil, fmt.Errorf("import %s: %w", h.ID, err)
	}
	return v, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ImportLineage records lineage records in g, one version per record, and
// returns them in record order. A lineage file has no chunk payloads, so:
//
//   - a version holds no chunks (its transcript is empty) unless the record
//     carries Rows, which must then number ChunkCount; chunk_count is kept
//     under [ExtraChunkCount];
//   - the version id is the OpenRath id, and CreatedAt is the zero time (the
//     file has no timestamps), so importing the same records again is a
//     no-op;
//   - parents that are records of the same call become graph parents, in
//     order; parents that are not (dangling, as in OpenRath's journal
//     exports) are listed under [ExtraDanglingParents] instead, and the full
//     list under [ExtraParentSessionIDs];
//   - the operator maps through [MapOperator]; when the mapped op does not
//     fit the graph parents (a fork whose parent is dangling, a merge with
//     fewer than two parents in the file) or the operator is unknown, the
//     op is import. Operator, kind, extras and usage are kept as Extras.
//
// Records may come in any order; a cycle among them is [session.ErrCycle]
// and a repeated id is [ErrFormat].
func ImportLineage(ctx context.Context, g session.Graph, recs []LineageRecord) ([]session.Session, error) {
	ids := make([]session.ID, len(recs))
	pos := make(map[session.ID]int, len(recs))
	for i := range recs {
		if err := checkUUID("id", recs[i].ID); err != nil {
			return nil, fmt.Errorf("record %d: %w: %w", i, ErrFormat, err)
		}
		ids[i] = uuid.MustParse(recs[i].ID)
		if j, dup := pos[ids[i]]; dup {
			return nil, fmt.Errorf("record %d: %w: id %s repeats record %d", i, ErrFormat, recs[i].ID, j)
		}
		pos[ids[i]] = i
		for k, p := range recs[i].ParentSessionIDs {
			if err := checkUUID(fmt.Sprintf("parent_session_ids[%d]", k), p); err != nil {
				return nil, fmt.Errorf("record %d (%s): %w: %w", i, recs[i].ID, ErrFormat, err)
			}
		}
	}
	order, err := lineageOrder(recs, pos)
	if err != nil {
		return nil, err
	}
	out := make([]session.Session, len(recs))
	for _, i := range order {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s, err := importRecord(ctx, g, &recs[i], ids[i], pos, out)
		if err != nil {
			return nil, fmt.Errorf("record %d (%s): %w", i, recs[i].ID, err)
		}
		out[i] = s
	}
	return out, nil
}

// lineageOrder orders records parents first, otherwise in record order.
func lineageOrder(recs []LineageRecord, pos map[session.ID]int) ([]int, error) {
	pending := make([]int, len(recs))
	children := make([][]int, len(recs))
	for i := range recs {
		seen := map[int]bool{}
		for _, p := range recs[i].ParentSessionIDs {
			if j, ok := pos[uuid.MustParse(p)]; ok && !seen[j] {
				seen[j] = true
				pending[i]++
				children[j] = append(children[j], i)
			}
		}
	}
	var ready []int // sorted ascending
	for i, n := range pending {
		if n == 0 {
			ready = append(ready, i)
		}
	}
	order := make([]int, 0, len(recs))
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, c := range children[i] {
			if pending[c]--; pending[c] == 0 {
				at, _ := slices.BinarySearch(ready, c)
				ready = slices.Insert(ready, at, c)
			}
		}
	}
	if len(order) != len(recs) {
		for i, n := range pending {
			if n > 0 {
				return nil, fmt.Errorf("record %d (%s): %w", i, recs[i].ID, session.ErrCycle)
			}
		}
	}
	return order, nil
}

func importRecord(ctx context.Context, g session.Graph, rec *LineageRecord, id session.ID, pos map[session.ID]int, done []session.Session) (session.Session, error) {
	var (
		parents  []session.ID
		pvs      []*session.Version
		dangling []string
	)
	for _, p := range rec.ParentSessionIDs {
		pid := uuid.MustParse(p)
		j, ok := pos[pid]
		if !ok {
			dangling = append(dangling, p)
			continue
		}
		if !slices.Contains(parents, pid) {
			parents = append(parents, pid)
			pvs = append(pvs, done[j].Version())
		}
	}
	var chunks []session.Chunk
	if rec.Rows != nil {
		if len(rec.Rows) != rec.ChunkCount {
			return session.Session{}, fmt.Errorf("%w: %d rows given for chunk_count %d", ErrFormat, len(rec.Rows), rec.ChunkCount)
		}
		chunks = slices.Clone(rec.Rows)
	}
	mapped, ok := MapOperator(rec.LineageOperator)
	var l extraList
	l.add(ExtraSource, "lineage")
	l.add(ExtraParentSessionIDs, nonNil(rec.ParentSessionIDs))
	if len(dangling) > 0 {
		l.add(ExtraDanglingParents, dangling)
	}
	l.add(ExtraOperator, rec.LineageOperator)
	l.add(ExtraKind, rec.LineageKind)
	l.add(ExtraLineageExtras, pyExtrasJSON(rec.LineageExtras))
	l.add(ExtraChunkCount, rec.ChunkCount)
	l.add(ExtraUsage, rec.CumulativeUsage)
	if l.err != nil {
		return session.Session{}, l.err
	}
	v := &session.Version{
		ID:      id,
		Parents: parents,
		Op:      fitOp(mapped, ok, len(parents)),
		Chunks:  chunks,
		Usage:   usageOf(rec.CumulativeUsage),
		Extras:  l.out,
	}
	if err := session.Seal(v, pvs, nil); err != nil {
		return session.Session{}, err
	}
	got, err := g.Put(ctx, v)
	if err != nil {
		return session.Session{}, err
	}
	return session.Wrap(g, got), nil
}

func extraValue(v *session.Version, key string) (json.RawMessage, bool) {
	for _, e := range v.Extras {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

func decodeExtra(v *session.Version, key string, into any) (bool, error) {
	raw, ok := extraValue(v, key)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return true, fmt.Errorf("extra %s: %w", key, err)
	}
	return true, nil
}

// reverse maps a Rath op to OpenRath's operator and kind.
func reverse(v *session.Version) (operator, kind string) {
	switch v.Op {
	case session.OpFork:
		return "Session.fork", "op_fork"
	case session.OpDetach:
		return "Session.detach", "op_detach"
	case session.OpMerge:
		return "Session.merge", "op_merge"
	case session.OpStep:
		return "run_session_loop", "op_session_loop"
	case session.OpCompress:
		return "run_session_compress", "op_session_compress"
	case session.OpCreate:
		if len(v.Chunks) > 0 && v.Chunks[0].Kind() == session.KindSystem {
			return "Session.create", "leaf_system"
		}
		return "Session.create", "leaf_user"
	}
	return "rath." + string(v.Op), "unknown"
}

// LineageRecordOf returns the lineage record OpenRath would export for v.
// For a version made by [ImportLineage] or [ImportPersisted] it is the
// record that was imported (so an import can be written back byte for
// byte); for any other version it is derived: id, parents, the operator
// and kind of v's op, v's extras, its transcript length and usage (null
// when zero).
func LineageRecordOf(v *session.Version) (LineageRecord, error) {
	var src string
	if ok, err := decodeExtra(v, ExtraSource, &src); err != nil {
		return LineageRecord{}, err
	} else if !ok {
		return deriveRecord(v)
	}
	rec := LineageRecord{ID: v.ID.String(), ChunkCount: v.Len}
	var rawExtras []json.RawMessage
	for _, f := range []struct {
		key  string
		into any
	}{
		{ExtraParentSessionIDs, &rec.ParentSessionIDs},
		{ExtraOperator, &rec.LineageOperator},
		{ExtraKind, &rec.LineageKind},
		{ExtraLineageExtras, &rawExtras},
		{ExtraChunkCount, &rec.ChunkCount},
		{ExtraUsage, &rec.CumulativeUsage},
	} {
		if _, err := decodeExtra(v, f.key, f.into); err != nil {
			return LineageRecord{}, err
		}
	}
	ex, err := decodeExtras(rawExtras)
	if err != nil {
		return LineageRecord{}, fmt.Errorf("extra %s: %w", ExtraLineageExtras, err)
	}
	rec.LineageExtras = ex
	rec.ParentSessionIDs = nonNil(rec.ParentSessionIDs)
	return rec, nil
}

func deriveRecord(v *session.Version) (LineageRecord, error) {
	op, kind := reverse(v)
	rec := LineageRecord{
		ID: v.ID.String(), ParentSessionIDs: make([]string, len(v.Parents)),
		LineageOperator: op, LineageKind: kind, ChunkCount: v.Len, LineageExtras: []Extra{},
	}
	for i, p := range v.Parents {
		rec.ParentSessionIDs[i] = p.String()
	}
	for _, e := range v.Extras {
		val, err := appendPyRaw(nil, e.Value)
		if err != nil {
			return LineageRecord{}, fmt.Errorf("extra %s: %w", e.Key, err)
		}
		rec.LineageExtras = append(rec.LineageExtras, Extra{Key: e.Key, Value: val})
	}
	if !v.Usage.IsZero() {
		rec.CumulativeUsage = &Usage{PromptTokens: v.Usage.PromptTokens, CompletionTokens: v.Usage.CompletionTokens, TotalTokens: v.Usage.TotalTokens}
	}
	return rec, nil
}

// WriteSession writes s's transcript to dir as an OpenRath transcript
// (<dir>/<id>.jsonl, or <id>.jsonl.__partial__ for a version imported from
// a transcript that had no trailer) and returns its path: [PersistedOf]'s
// transcript, closed now when s does not record its own closed_at.
func WriteSession(ctx context.Context, dir string, s session.Session) (string, error) {
	p, err := persistedOf(ctx, s, time.Now())
	if err != nil {
		return "", err
	}
	w, err := Create(dir, p.Header)
	if err != nil {
		return "", err
	}
	for _, r := range p.Rows {
		if err := w.WriteChunk(r.Chunk); err != nil {
			_ = w.Abandon()
			return "", err
		}
	}
	if p.Trailer == nil {
		if err := w.Abandon(); err != nil {
			return "", err
		}
		return w.Path(), nil
	}
	closedAt, err := parsePyTime(p.Trailer.ClosedAt)
	if err != nil {
		_ = w.Abandon()
		return "", err
	}
	if err := w.CloseAt(closedAt, p.Trailer.CumulativeUsage); err != nil {
		_ = w.Abandon()
		return "", err
	}
	return w.Path(), nil
}

// PersistedOf returns s's transcript as OpenRath would persist it. The
// header carries s's lineage as [LineageRecordOf] gives it and its
// sandbox as the openrath.sandbox_* extras record it (a version imported
// from OpenRath), else as its Placement. Rath's evidence chunks (memory
// recall, selector decisions, approvals, notes, summaries), which OpenRath
// cannot read, are left out, so the transcript may hold fewer chunks than
// s.Len(). The trailer is the one s was imported with: none when the
// imported transcript had none (a partial write), and otherwise closed at
// the recorded closed_at, or at s's CreatedAt for versions Rath made. So
// exporting a version imported from a transcript gives the transcript back,
// and importing that again gives the same version.
func PersistedOf(ctx context.Context, s session.Session) (*Persisted, error) {
	return persistedOf(ctx, s, s.Version().CreatedAt)
}

func persistedOf(ctx context.Context, s session.Session, closeAt time.Time) (*Persisted, error) {
	v := s.Version()
	rec, err := LineageRecordOf(v)
	if err != nil {
		return nil, err
	}
	h := Header{
		SchemaVersion:    SchemaVersion,
		ID:               rec.ID,
		CreatedAt:        pyISOTime(v.CreatedAt),
		ParentSessionIDs: rec.ParentSessionIDs,
		LineageOperator:  rec.LineageOperator,
		LineageKind:      rec.LineageKind,
		LineageExtras:    rec.LineageExtras,
	}
	if _, err := decodeExtra(v, ExtraCreatedAt, &h.CreatedAt); err != nil {
		return nil, err
	}
	if ok, err := decodeExtra(v, ExtraSandboxSpec, &h.SandboxSpec); err != nil {
		return nil, err
	} else if !ok && !v.Placement.Spec.IsZero() {
		sp := v.Placement.Spec
		h.SandboxSpec = &SandboxSpec{Entrypoint: sp.Entrypoint, Env: sp.Env}
		if sp.Image != "" {
			h.SandboxSpec.Image = &sp.Image
		}
		if sp.TimeoutSeconds != 0 {
			h.SandboxSpec.TimeoutSeconds = &sp.TimeoutSeconds
		}
		if sp.WorkingDir != "" {
			h.SandboxSpec.WorkingDir = &sp.WorkingDir
		}
	}
	if ok, err := decodeExtra(v, ExtraSandboxBackend, &h.SandboxBackend); err != nil {
		return nil, err
	} else if !ok && v.Placement.Backend != "" {
		h.SandboxBackend = &v.Placement.Backend
	}
	if ok, err := decodeExtra(v, ExtraSandboxHandleID, &h.SandboxHandleID); err != nil {
		return nil, err
	} else if !ok && v.Placement.Spec.HandleID != "" {
		h.SandboxHandleID = &v.Placement.Spec.HandleID
	}
	chunks, err := s.Chunks(ctx)
	if err != nil {
		return nil, err
	}
	p := &Persisted{Header: h}
	for _, c := range chunks {
		if openRathKind(c.Kind()) {
			p.Rows = append(p.Rows, Row{Index: len(p.Rows), Chunk: c})
		}
	}
	var tr *struct {
		ClosedAt string `json:"closed_at"`
	}
	hasTrailer, err := decodeExtra(v, ExtraTrailer, &tr)
	if err != nil {
		return nil, err
	}
	if hasTrailer && tr == nil {
		return p, nil // imported from a transcript without a trailer
	}
	closed := pyISOTime(closeAt)
	if tr != nil && tr.ClosedAt != "" {
		closed = tr.ClosedAt
	}
	p.Trailer = &Trailer{ClosedAt: closed, FinalChunkCount: len(p.Rows), CumulativeUsage: rec.CumulativeUsage}
	return p, nil
}
