package flow_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// scriptedSpec is an agent spec of the scripted model.
func scriptedSpec(name string, replies ...string) agent.Spec {
	s := agent.Spec{Name: name, Model: "scripted"}
	for _, r := range replies {
		s.Script = append(s.Script, llm.ScriptReply{Content: r})
	}
	return s
}

// scriptedEnv resolves every spec to the scripted model of its script.
func scriptedEnv() flow.Env {
	return flow.Env{Resolve: func(s agent.Spec) (llm.Provider, string, error) {
		return &llm.Scripted{Replies: s.Script}, llm.ScriptedModel, nil
	}}
}

// serverEnv resolves every spec to the fake OpenAI server, the spec's model
// naming the model.
func serverEnv(t *testing.T, srv *llmtest.Server) flow.Env {
	t.Helper()
	return flow.Env{Resolve: func(s agent.Spec) (llm.Provider, string, error) {
		p, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: srv.URL(), APIKey: "test-key", Model: s.Model, MaxAttempts: 1})
		return p, s.Model, err
	}}
}

// modelSpec is an agent spec of a fake-server model.
func modelSpec(name string) agent.Spec { return agent.Spec{Name: name, Model: name} }

// countAssistant counts the assistant messages of a request.
func countAssistant(r llmtest.Request) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == llm.RoleAssistant {
			n++
		}
	}
	return n
}

// answer is a deterministic fake-server handler: a router answers n%2
// (n assistant messages in the request) until n reaches 6, then "-1"; a
// compressor ("squash") summarizes; any other model says who it is and how
// many assistant messages it saw.
func answer(r llmtest.Request) llmtest.Reply {
	n := countAssistant(r)
	switch r.Model {
	case "router":
		if n < 6 {
			return llmtest.Reply{Content: fmt.Sprintf("I choose %d.", n%2)}
		}
		return llmtest.Reply{Content: "-1: done"}
	case "squash":
		return llmtest.Reply{Content: fmt.Sprintf("summary of %d messages", len(r.Messages))}
	}
	return llmtest.Reply{Content: fmt.Sprintf("%s after %d", r.Model, n), Usage: session.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}}
}

func texts(t *testing.T, s session.Session) []string {
	t.Helper()
	cs, err := s.Chunks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c.Kind()) + ":" + c.Text()
	}
	return out
}

func mustUser(t *testing.T, g session.Graph, text string) session.Session {
	t.Helper()
	s, err := session.FromUserMessage(context.Background(), g, text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
