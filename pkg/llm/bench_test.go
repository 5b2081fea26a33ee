package llm_test

import (
	"testing"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// BenchmarkOpenAIChat measures one call through go-openai, the body patch
// and the fake server on loopback: the provider's own overhead plus HTTP.
func BenchmarkOpenAIChat(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "sse"
		}
		b.Run(name, func(b *testing.B) {
			srv := llmtest.NewServer(b)
			srv.Handle(func(llmtest.Request) llmtest.Reply {
				return llmtest.Reply{Content: "a short answer of eight words in total", Usage: session.Usage{PromptTokens: 10, CompletionTokens: 8}}
			})
			p, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: srv.URL(), APIKey: "k", Model: "m"})
			if err != nil {
				b.Fatal(err)
			}
			req := userReq("hello there")
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if stream {
					_, err = p.ChatStream(b.Context(), req, func(string) {})
				} else {
					_, err = p.Chat(b.Context(), req)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkScriptedChat(b *testing.B) {
	s := scriptedFixture()
	req := userReq("read hello.txt please")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Chat(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}
