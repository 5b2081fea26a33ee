package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// ErrToolsUnavailable is returned when the model asks for a tool call and the
// agent has no tool runtime to execute it.
var ErrToolsUnavailable = errors.New("rath: model requested tools but none are available")

// Agent forwards sessions through a model. It is safe for concurrent use if
// its Provider is.
type Agent struct {
	Spec     Spec
	Provider llm.Provider
	// Model is the resolved provider model name; Spec.Model when empty.
	Model string
}

// Meta describes the step an agent call belongs to. It is recorded on the
// version the step commits.
type Meta struct {
	// Key makes the commit idempotent: a redelivered step finds its version.
	Key      string
	Producer session.Producer
	// OnDelta, when set and the provider streams, receives text deltas.
	OnDelta func(string)
}

// Forward runs one step of the agent on s and returns the new session.
func (a *Agent) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	return a.Step(ctx, s, Meta{})
}

// Step runs one step: it sends the instructions and s's transcript to the
// model and records the reply (op step) with its usage and producer. The
// instructions are sent, not written into the session, as in OpenRath.
func (a *Agent) Step(ctx context.Context, s session.Session, m Meta) (session.Session, error) {
	chunks, err := s.Chunks(ctx)
	if err != nil {
		return session.Session{}, err
	}
	model := a.Model
	if model == "" {
		model = a.Spec.Model
	}
	req := llm.Request{
		Model:           model,
		Messages:        a.messages(chunks),
		Temperature:     a.Spec.Params.Temperature,
		MaxTokens:       a.Spec.Params.MaxTokens,
		Seed:            a.Spec.Params.Seed,
		Stop:            a.Spec.Params.Stop,
		ToolChoice:      a.Spec.Params.ToolChoice,
		ReasoningEffort: a.Spec.Params.ReasoningEffort,
		ResponseFormat:  a.Spec.Params.ResponseFormat,
	}
	var resp llm.Response
	if st, ok := a.Provider.(llm.Streamer); ok && m.OnDelta != nil {
		resp, err = st.ChatStream(ctx, req, m.OnDelta)
	} else {
		resp, err = a.Provider.Chat(ctx, req)
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("agent %s: model %s: %w", a.Spec.Name, model, err)
	}
	if len(resp.ToolCalls) > 0 {
		return session.Session{}, fmt.Errorf("agent %s: %w", a.Spec.Name, ErrToolsUnavailable)
	}
	p := m.Producer
	p.Agent = a.Spec.Name
	if p.Model = resp.Model; p.Model == "" {
		p.Model = model
	}
	return s.Extend(ctx, session.Extension{
		Op:       session.OpStep,
		Chunks:   []session.Chunk{resp.Chunk()},
		Usage:    resp.Usage,
		Producer: p,
		Key:      m.Key,
	})
}

func (a *Agent) messages(chunks []session.Chunk) []llm.Message {
	msgs := llm.MessagesFromChunks(chunks)
	if a.Spec.Instructions == "" {
		return msgs
	}
	return append([]llm.Message{{Role: "system", Content: a.Spec.Instructions}}, msgs...)
}
