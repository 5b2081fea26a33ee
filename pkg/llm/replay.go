package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rath-run/rath/pkg/session"
)

// ErrReplayDiverged means a replayed step asked the model something the
// recording does not hold (a different transcript, or more calls than were
// recorded), or made fewer calls than were recorded. It also matches
// ErrPermanent.
var ErrReplayDiverged = errors.New("rath: replay diverged from the recording")

// ReplayModel is the model name a replay reports when the recording names
// none.
const ReplayModel = "replay"

// ReplayOptions configure a [Replay].
type ReplayOptions struct {
	// Lenient answers the recorded replies in order whatever the requests
	// hold, and does not mind a step that makes fewer calls. The zero value
	// is strict: see [Replay].
	Lenient bool
	// RoundUsage is each recorded model call's usage, in order (a step
	// version's "loop.round_usage" extra); missing rounds report zero.
	RoundUsage []session.Usage
	// Model is reported as the answering model; default [ReplayModel].
	Model string
}

// Replay is a [Provider] that answers a step's model calls from what an
// earlier run of the step recorded, instead of calling a model: the
// assistant chunks the step appended after its input, in order, each with
// the usage recorded for its round. It is what `rathctl replay` uses to
// re-run a step deterministically, and a test double for code that calls
// models.
//
// In strict mode (the default) the n-th call must send exactly the
// transcript the recording had before its n-th reply: the step's input
// followed by the chunks the step recorded before that reply, mapped with
// [MessagesFromChunks]. System messages in front of that transcript (the
// agent's instructions, which are not recorded) are allowed. A call that
// sends anything else, or a call past the last recorded reply, fails with an
// error wrapping [ErrReplayDiverged] that names the round and the first
// message that differs; [Replay.Verify] reports a step that made fewer calls
// than recorded. The request's tools and parameters are not recorded and
// are not compared.
//
// A Replay is safe for concurrent use; calls are counted in the order they
// arrive.
type Replay struct {
	rounds  []replayRound
	lenient bool
	model   string

	mu    sync.Mutex // guards following
	calls int
}

// replayRound is one recorded model call: the transcript it was sent and
// the reply.
type replayRound struct {
	sent  []Message
	reply Response
}

// NewReplay returns a replay of a step whose input transcript was input and
// which appended step (a step version's own chunks). A step that recorded no
// assistant chunk is an error: there is nothing to replay.
func NewReplay(input, step []session.Chunk, opts ReplayOptions) (*Replay, error) {
	r := &Replay{lenient: opts.Lenient, model: opts.Model}
	if r.model == "" {
		r.model = ReplayModel
	}
	transcript := MessagesFromChunks(input)
	for i := 0; i < len(step); i++ {
		c := step[i]
		if c.Kind() != session.KindAssistant {
			transcript = append(transcript, MessagesFromChunks(step[i:i+1])...)
			continue
		}
		resp := Response{Content: c.Text(), ToolCalls: c.ToolCalls(), Model: r.model, FinishReason: FinishStop}
		if len(resp.ToolCalls) > 0 {
			resp.FinishReason = FinishToolCalls
		}
		// The loop records how a reply ended unusually as a note right
		// after it; read it back so the replayed loop records it again.
		for j := i + 1; j < len(step) && step[j].Kind() == session.KindNote; j++ {
			switch noteEvent(step[j]) {
			case "content_filter":
				resp.FinishReason = FinishContentFilter
			case "refusal":
				resp.Refusal, resp.Content = resp.Content, ""
			}
		}
		if n := len(r.rounds); n < len(opts.RoundUsage) {
			resp.Usage = opts.RoundUsage[n]
		}
		r.rounds = append(r.rounds, replayRound{sent: transcript[:len(transcript):len(transcript)], reply: resp})
		transcript = append(transcript, MessagesFromChunks(step[i:i+1])...)
	}
	if len(r.rounds) == 0 {
		return nil, fmt.Errorf("replay: the step recorded no model reply (%d chunks, none from the assistant)", len(step))
	}
	return r, nil
}

// ReplayVersion returns a replay of the step that committed s: s's own
// chunks after its base transcript, with the per-round usage and the model
// it recorded (unless opts sets them). s must be a step version.
func ReplayVersion(ctx context.Context, s session.Session, opts ReplayOptions) (*Replay, error) {
	v := s.Version()
	if v == nil {
		return nil, errors.New("replay: no version")
	}
	if v.Op != session.OpStep {
		return nil, fmt.Errorf("replay: version %s was made by %s, not by a step", v.ID, v.Op)
	}
	all, err := s.Chunks(ctx)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if len(all) < len(v.Chunks) {
		return nil, fmt.Errorf("replay: version %s has %d own chunks but a transcript of %d", v.ID, len(v.Chunks), len(all))
	}
	if opts.RoundUsage == nil {
		for _, e := range v.Extras {
			if e.Key == "loop.round_usage" {
				if err := json.Unmarshal(e.Value, &opts.RoundUsage); err != nil {
					return nil, fmt.Errorf("replay: version %s: extra loop.round_usage: %w", v.ID, err)
				}
			}
		}
	}
	if opts.Model == "" {
		opts.Model = v.Producer.Model
	}
	return NewReplay(all[:len(all)-len(v.Chunks)], v.Chunks, opts)
}

func noteEvent(c session.Chunk) string {
	var n struct {
		Event string `json:"event"`
	}
	_ = json.Unmarshal(c.Payload(), &n)
	return n.Event
}

// Rounds returns how many model replies the recording holds.
func (r *Replay) Rounds() int { return len(r.rounds) }

// Calls returns how many calls the replay has answered or refused.
func (r *Replay) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// Verify reports, in strict mode, a step that made fewer model calls than
// the recording holds; call it after the step. It returns nil in lenient
// mode and when every recorded reply was used.
func (r *Replay) Verify() error {
	n := r.Calls()
	if r.lenient || n >= len(r.rounds) {
		return nil
	}
	return &Error{Op: "replay", cause: ErrReplayDiverged, Message: fmt.Sprintf(
		"%v: the step made %d model calls and stopped; the recording has %d (round %d was never asked for)",
		ErrReplayDiverged, n, len(r.rounds), n+1)}
}

// Chat answers the next recorded round.
func (r *Replay) Chat(ctx context.Context, req Request) (Response, error) {
	return r.ChatStream(ctx, req, nil)
}

// ChatStream answers the next recorded round, passing its whole content to
// onDelta as one delta.
func (r *Replay) ChatStream(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	const op = "replay"
	if err := ctx.Err(); err != nil {
		return Response{}, ctxError(ctx, op, 1)
	}
	r.mu.Lock()
	n := r.calls
	r.calls++
	r.mu.Unlock()
	if n >= len(r.rounds) {
		return Response{}, &Error{Op: op, cause: ErrReplayDiverged, Message: fmt.Sprintf(
			"%v: round %d: the step asked the model again, but the recording has only %d replies",
			ErrReplayDiverged, n+1, len(r.rounds))}
	}
	round := r.rounds[n]
	if !r.lenient {
		if diff := diffTranscript(req.Messages, round.sent); diff != "" {
			return Response{}, &Error{Op: op, cause: ErrReplayDiverged, Message: fmt.Sprintf(
				"%v: round %d: %s", ErrReplayDiverged, n+1, diff)}
		}
	}
	resp := round.reply
	resp.ToolCalls = cloneCalls(resp.ToolCalls)
	if onDelta != nil && resp.Content != "" {
		onDelta(resp.Content)
	}
	return resp, nil
}

func cloneCalls(calls []session.ToolCall) []session.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]session.ToolCall, len(calls))
	copy(out, calls)
	return out
}

// diffTranscript describes how got, a request's messages, differs from
// want, the recorded transcript: got must be want, optionally after system
// messages (the instructions). It returns "" when they match.
func diffTranscript(got, want []Message) string {
	if head := len(got) - len(want); head >= 0 && leadingSystem(got) >= head {
		same := true
		for i := range want {
			if diffMessage(got[head+i], want[i]) != "" {
				same = false
				break
			}
		}
		if same {
			return ""
		}
	}
	// Skip the instructions (the leading system messages the recording does
	// not have) and find the first difference.
	rest := got[max(0, leadingSystem(got)-leadingSystem(want)):]
	for i := range min(len(rest), len(want)) {
		if d := diffMessage(rest[i], want[i]); d != "" {
			if len(rest) == len(want) {
				return fmt.Sprintf("transcript message %d (of %d) differs from the recording: %s", i, len(want), d)
			}
			return fmt.Sprintf("the request sends %d transcript messages, the recording had %d; message %d differs: %s",
				len(rest), len(want), i, d)
		}
	}
	if len(rest) > len(want) {
		return fmt.Sprintf("the request sends %d transcript messages, the recording had %d; extra message %d: %s",
			len(rest), len(want), len(want), describe(rest[len(want)]))
	}
	if len(rest) < len(want) {
		return fmt.Sprintf("the request sends %d transcript messages, the recording had %d; missing message %d: %s",
			len(rest), len(want), len(rest), describe(want[len(rest)]))
	}
	// Same messages after the instructions, but in front of them something
	// the recording does not have.
	return fmt.Sprintf("the request sends %d messages before the recorded transcript, not only system messages", len(got)-len(want))
}

func leadingSystem(msgs []Message) int {
	n := 0
	for n < len(msgs) && msgs[n].Role == RoleSystem {
		n++
	}
	return n
}

// diffMessage names the first field in which got differs from want.
func diffMessage(got, want Message) string {
	field := func(name, g, w string) string {
		return fmt.Sprintf("%s %s: got %s, recorded %s", describe(want), name, quote(g), quote(w))
	}
	switch {
	case got.Role != want.Role:
		return fmt.Sprintf("role: got %s, recorded %s (%s)", got.Role, want.Role, describe(want))
	case got.Content != want.Content:
		return field("content", got.Content, want.Content)
	case got.ToolCallID != want.ToolCallID:
		return field("tool_call_id", got.ToolCallID, want.ToolCallID)
	case got.Name != want.Name:
		return field("name", got.Name, want.Name)
	case len(got.ToolCalls) != len(want.ToolCalls):
		return fmt.Sprintf("%s: got %d tool calls, recorded %d", describe(want), len(got.ToolCalls), len(want.ToolCalls))
	}
	for i, g := range got.ToolCalls {
		w := want.ToolCalls[i]
		switch {
		case g.ID != w.ID:
			return field(fmt.Sprintf("tool_calls[%d].id", i), g.ID, w.ID)
		case g.Function.Name != w.Function.Name:
			return field(fmt.Sprintf("tool_calls[%d].function.name", i), g.Function.Name, w.Function.Name)
		case g.Function.Arguments != w.Function.Arguments:
			return field(fmt.Sprintf("tool_calls[%d].function.arguments", i), g.Function.Arguments, w.Function.Arguments)
		}
	}
	return ""
}

// describe names a message for an error: its role, and its call id for a
// tool result.
func describe(m Message) string {
	if m.Role == RoleTool {
		return "tool result for " + m.ToolCallID
	}
	return m.Role + " message"
}

// quote quotes s for an error, cut to 120 bytes.
func quote(s string) string {
	const limit = 120
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return fmt.Sprintf("%q", s)
}
