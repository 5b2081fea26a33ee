package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/session"
)

// MemorySpec binds an agent to a memory store. In a spec it is either a
// store name (`memory: local`) or an object
// (`memory: {store: local, commit: true, top_k: 4, namespace: team/a}`).
type MemorySpec struct {
	// Store names the store: "local" (the deployment's persistent store:
	// .rath/memory.db under rathctl dev, Postgres in a cluster). "" binds
	// nothing.
	Store string `json:"store,omitempty"`
	// Namespace partitions the store; "" means memory.DefaultNamespace.
	Namespace string `json:"namespace,omitempty"`
	// TopK bounds the items recalled before a step; 0 means 4.
	TopK int `json:"top_k,omitempty"`
	// Scope restricts recall to a memory:// scope or directory.
	Scope string `json:"scope,omitempty"`
	// Commit archives the step's conversation into memory after the step
	// (memory://session/<version id>/transcript), written by that version.
	Commit bool `json:"commit,omitempty"`
	// Extract, with Commit, also asks the agent's own model for short
	// memos about the conversation and remembers each as its own item
	// (memory://session/<version id>/memos/<n>, metadata
	// source=extraction); see [Commit].
	Extract bool `json:"extract,omitempty"`
}

// IsZero reports whether no store is bound.
func (m MemorySpec) IsZero() bool { return m == MemorySpec{} }

// MarshalJSON writes the string form when only the store is set, so specs
// written as `memory: local` keep their shape.
func (m MemorySpec) MarshalJSON() ([]byte, error) {
	if m == (MemorySpec{Store: m.Store}) {
		return json.Marshal(m.Store)
	}
	type plain MemorySpec
	return json.Marshal(plain(m))
}

// UnmarshalJSON accepts a string (the store) or an object; unknown fields
// are refused.
func (m *MemorySpec) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*m = MemorySpec{Store: s}
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		*m = MemorySpec{}
		return nil
	}
	type plain MemorySpec
	var p plain
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	*m = MemorySpec(p)
	return nil
}

func (m MemorySpec) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: memory.%s: %s", ErrInvalidSpec, field, fmt.Sprintf(format, args...))
	}
	if m.Store == "" && !m.IsZero() {
		return bad("store", "required when memory is set (e.g. local)")
	}
	if m.TopK < 0 || m.TopK > memory.MaxTopK {
		return bad("top_k", "must be in 0..%d, got %d", memory.MaxTopK, m.TopK)
	}
	if _, err := memory.CheckNamespace(m.Namespace); err != nil {
		return bad("namespace", "%v", err)
	}
	if _, err := memory.ParseScope(m.Scope); err != nil {
		return bad("scope", "%v", err)
	}
	if m.Extract && !m.Commit {
		return bad("extract", "requires commit: true (memos are extracted when the conversation is committed)")
	}
	return nil
}

// RecallBody is the payload of a memory_recall chunk: what memory
// contributed to a step.
type RecallBody struct {
	Store     string      `json:"store"`
	Namespace string      `json:"namespace"`
	Query     string      `json:"query"`
	Hits      []RecallHit `json:"hits"`
	// Mode is how the hits were ranked: "embedding" or "bm25"; empty when
	// the store does not report it (a plain BM25 store).
	Mode string `json:"mode,omitempty"`
	// Warning is set when embedding recall failed and BM25 answered.
	Warning string `json:"warning,omitempty"`
	// Error is set when recall failed; the step went on without memory.
	Error string `json:"error,omitempty"`
}

// infoRecaller is a store that reports how it recalled ([memory.Semantic]).
type infoRecaller interface {
	RecallInfo(ctx context.Context, namespace string, q memory.Query) (memory.RecallResult, error)
}

// RecallHit is one recalled item; VersionID is the session version that
// wrote it.
type RecallHit struct {
	URI       string  `json:"uri"`
	Score     float64 `json:"score"`
	Snippet   string  `json:"snippet"`
	VersionID string  `json:"version_id,omitempty"`
}

// recall runs the binding's recall with the last user message of chunks.
// It returns the memory_recall chunk to record and the system text the
// model sees ("[memory:<uri>] <snippet>" per hit, as OpenRath injects), or
// a zero chunk when there is nothing to recall with.
func (a *Agent) recall(ctx context.Context, chunks []session.Chunk) (session.Chunk, string, bool) {
	ms := a.Spec.Memory
	if a.Memory == nil || ms.Store == "" {
		return session.Chunk{}, "", false
	}
	query := ""
	for i := len(chunks) - 1; i >= 0; i-- {
		if chunks[i].Kind() == session.KindUser && strings.TrimSpace(chunks[i].Text()) != "" {
			query = chunks[i].Text()
			break
		}
	}
	if query == "" {
		return session.Chunk{}, "", false
	}
	ns, _ := memory.CheckNamespace(ms.Namespace)
	body := RecallBody{Store: ms.Store, Namespace: ns, Query: truncate(query, 4096), Hits: []RecallHit{}}
	q := memory.Query{Text: query, TopK: ms.TopK, Scope: ms.Scope}
	var hits []memory.Hit
	var err error
	if ir, ok := a.Memory.(infoRecaller); ok {
		var r memory.RecallResult
		r, err = ir.RecallInfo(ctx, ns, q)
		hits, body.Mode, body.Warning = r.Hits, r.Mode, r.Warning
	} else {
		hits, err = a.Memory.Recall(ctx, ns, q)
	}
	var sys strings.Builder
	if err != nil {
		body.Error = err.Error()
	}
	for _, h := range hits {
		body.Hits = append(body.Hits, RecallHit{URI: h.URI, Score: h.Score, Snippet: h.Snippet, VersionID: h.VersionID})
		if sys.Len() > 0 {
			sys.WriteByte('\n')
		}
		sys.WriteString("[memory:" + h.URI + "]")
		if h.Snippet != "" {
			sys.WriteString(" " + h.Snippet)
		}
	}
	c, cerr := session.Evidence(session.KindMemoryRecall, body)
	if cerr != nil {
		return session.Chunk{}, "", false
	}
	return c, sys.String(), true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// commitMemory archives the step's output when the spec asks for it
// (commit: true), through [Commit], extracting memos with the agent's own
// provider and model when it also asks for extract: true.
func (a *Agent) commitMemory(ctx context.Context, out session.Session) (CommitResult, error) {
	ms := a.Spec.Memory
	if a.Memory == nil || ms.Store == "" || !ms.Commit {
		return CommitResult{}, nil
	}
	var ex *Extractor
	if ms.Extract {
		ex = &Extractor{Provider: a.Provider, Model: cmp.Or(a.Model, a.Spec.Model)}
	}
	return Commit(memory.WithVersion(ctx, out.ID().String()), a.Memory, ms.Namespace, out, a.Spec.Name, ex)
}

// TranscriptURI is the memory URI a commit of version id writes:
// memory://session/<id>/transcript.
func TranscriptURI(id session.ID) string { return "memory://session/" + id.String() + "/transcript" }

// CommitTranscript archives the conversation of out into st (namespace ns,
// "" for the default): the system, user and assistant text of its
// transcript (tool rows and evidence dropped, as OpenRath's commit does),
// one "kind: text" line each, keeping the latest turns when it exceeds
// [memory.MaxTextBytes]. The item is [TranscriptURI] of out's version and
// records that version as its writer, so committing the same version again
// rewrites the same item. agentName goes into the item's metadata ("agent";
// empty falls back to the version's producer). It is the one path both an
// agent's commit: true and `rathctl memory commit` take.
func CommitTranscript(ctx context.Context, st memory.Store, ns string, out session.Session, agentName string) (memory.Item, error) {
	chunks, err := out.Chunks(ctx)
	if err != nil {
		return memory.Item{}, fmt.Errorf("commit %s: read transcript: %w", out.ID(), err)
	}
	var b strings.Builder
	for _, c := range chunks {
		switch c.Kind() {
		case session.KindSystem, session.KindUser, session.KindAssistant:
			if t := c.Text(); strings.TrimSpace(t) != "" {
				b.WriteString(string(c.Kind()) + ": " + t + "\n")
			}
		}
	}
	text := b.String()
	if len(text) > memory.MaxTextBytes { // keep the latest turns
		text = text[len(text)-memory.MaxTextBytes:]
		for len(text) > 0 && !utf8RuneStart(text[0]) {
			text = text[1:]
		}
	}
	md := map[string]string{"kind": "commit"}
	if name := cmp.Or(agentName, out.Version().Producer.Agent); name != "" {
		md["agent"] = name
	}
	return st.Remember(ctx, ns, memory.Write{
		URI:       TranscriptURI(out.ID()),
		Text:      text,
		Metadata:  md,
		VersionID: out.ID().String(),
	})
}
