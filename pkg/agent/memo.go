package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/session"
)

// Limits of memo extraction's reply.
const (
	// MaxMemos is the most memos one extraction may return.
	MaxMemos = 32
	// MaxMemoBytes is the longest memo accepted.
	MaxMemoBytes = 2048
)

// ExtractionPrompt is the fixed system prompt memo extraction sends with
// the transcript.
const ExtractionPrompt = `You extract durable memories from a conversation transcript.
Reply with ONLY a JSON array of strings and nothing else: no prose, no code fence.
Each string is one short, self-contained fact worth remembering in later conversations
(preferences, decisions, names, facts about the user or the task), at most 300 characters.
Reply [] when nothing is worth remembering. At most 32 items.`

// ErrBadMemos is returned (wrapped) by [ParseMemos] for a reply that is not
// a JSON array of short non-empty strings.
var ErrBadMemos = errors.New("bad memo list")

// ParseMemos parses a model's extraction reply strictly: one JSON array of
// non-empty strings (surrounding whitespace allowed, nothing else), at most
// [MaxMemos] of at most [MaxMemoBytes] each. Memos are trimmed of
// surrounding whitespace. Any other reply is an error wrapping
// [ErrBadMemos] that says what is wrong.
func ParseMemos(reply string) ([]string, error) {
	b := bytes.TrimSpace([]byte(reply))
	if len(b) == 0 || b[0] != '[' {
		return nil, fmt.Errorf("%w: want a JSON array of strings, reply starts %q", ErrBadMemos, truncate(string(b), 40))
	}
	var raw []json.RawMessage
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMemos, err)
	}
	if d.More() || d.InputOffset() != int64(len(b)) {
		return nil, fmt.Errorf("%w: data after the JSON array", ErrBadMemos)
	}
	if len(raw) > MaxMemos {
		return nil, fmt.Errorf("%w: %d memos, at most %d", ErrBadMemos, len(raw), MaxMemos)
	}
	memos := make([]string, 0, len(raw))
	for i, r := range raw {
		var s string
		if len(r) == 0 || r[0] != '"' || json.Unmarshal(r, &s) != nil {
			return nil, fmt.Errorf("%w: item %d is not a string", ErrBadMemos, i)
		}
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return nil, fmt.Errorf("%w: item %d is empty", ErrBadMemos, i)
		case len(s) > MaxMemoBytes:
			return nil, fmt.Errorf("%w: item %d is %d bytes, at most %d", ErrBadMemos, i, len(s), MaxMemoBytes)
		case !utf8.ValidString(s):
			return nil, fmt.Errorf("%w: item %d is not valid UTF-8", ErrBadMemos, i)
		}
		memos = append(memos, s)
	}
	return memos, nil
}

// MemoURI is the URI of memo n (from 0) extracted from version id:
// memory://session/<id>/memos/<n>.
func MemoURI(id session.ID, n int) string {
	return "memory://session/" + id.String() + "/memos/" + strconv.Itoa(n)
}

// Extractor is the chat model memo extraction asks: Provider with Model
// ("" for the provider's configured model).
type Extractor struct {
	Provider llm.Provider
	Model    string
}

// CommitResult is what [Commit] wrote.
type CommitResult struct {
	// Transcript is the archived transcript ([CommitTranscript]).
	Transcript memory.Item `json:"transcript"`
	// Memos are the extracted memos' items, in the model's order.
	Memos []memory.Item `json:"memos,omitempty"`
	// Warning says why extraction wrote no memos (the model failed or
	// replied with something other than a memo list); the transcript is
	// archived regardless.
	Warning string `json:"warning,omitempty"`
}

// Commit archives out's transcript ([CommitTranscript]) and, when ex is
// not nil, asks ex's model for memos with [ExtractionPrompt] and the
// archived text, and remembers each as its own item, [MemoURI] n, written
// by out's version, metadata source=extraction, kind=memo and the agent.
// Only a failed archive is an error: a failed model call, a reply
// [ParseMemos] refuses or a failed memo write leaves the archive written
// and is reported in the result's Warning. A commit of the same version
// again rewrites the same items and deletes memos the new list lacks.
func Commit(ctx context.Context, st memory.Store, ns string, out session.Session, agentName string, ex *Extractor) (CommitResult, error) {
	tr, err := CommitTranscript(ctx, st, ns, out, agentName)
	if err != nil {
		return CommitResult{}, err
	}
	res := CommitResult{Transcript: tr}
	if ex == nil || ex.Provider == nil {
		return res, nil
	}
	memos, err := extract(ctx, ex, tr.Text)
	if err != nil {
		res.Warning = fmt.Sprintf("memo extraction failed, archived the transcript only: %v", err)
		return res, nil
	}
	md := map[string]string{"source": "extraction", "kind": "memo"}
	if name := cmp.Or(agentName, out.Version().Producer.Agent); name != "" {
		md["agent"] = name
	}
	for i, m := range memos {
		it, err := st.Remember(ctx, ns, memory.Write{URI: MemoURI(out.ID(), i), Text: m, Metadata: md, VersionID: out.ID().String()})
		if err != nil {
			res.Warning = fmt.Sprintf("memo extraction: remember memo %d: %v", i, err)
			return res, nil
		}
		res.Memos = append(res.Memos, it)
	}
	// A shorter list than an earlier commit's of this version: delete the
	// memos it no longer has (tombstones, written by this version).
	dir := "memory://session/" + out.ID().String() + "/memos/"
	old, err := st.List(ctx, ns, memory.ListOptions{Scope: dir, Limit: MaxMemos + 1})
	if err != nil {
		res.Warning = fmt.Sprintf("memo extraction: list earlier memos: %v", err)
		return res, nil
	}
	for _, it := range old {
		if n, err := strconv.Atoi(strings.TrimPrefix(it.URI, dir)); err != nil || n >= len(memos) {
			if err := st.Delete(ctx, ns, it.URI, out.ID().String()); err != nil {
				res.Warning = fmt.Sprintf("memo extraction: delete stale memo %s: %v", it.URI, err)
				return res, nil
			}
		}
	}
	return res, nil
}

func extract(ctx context.Context, ex *Extractor, transcript string) ([]string, error) {
	if strings.TrimSpace(transcript) == "" {
		return nil, nil
	}
	resp, err := ex.Provider.Chat(ctx, llm.Request{
		Model: ex.Model,
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: ExtractionPrompt},
			{Role: llm.RoleUser, Content: "Transcript:\n" + transcript},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return ParseMemos(resp.Content)
}
