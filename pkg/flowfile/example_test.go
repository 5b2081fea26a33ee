package flowfile_test

import (
	"context"
	"fmt"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flowfile"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// A declarative workflow: one agent, then a fork of two critics merged,
// built into SDK workflows and run in-process with scripted models.
func ExampleParse() {
	doc := []byte(`
agents:
  writer:
    model: scripted
    script: [A haiku about rain.]
  critic:
    model: scripted
    script: [unused, Too short.]
steps:
  - agent: writer
  - fork: {n: 2, agent: critic}
`)
	f, err := flowfile.Parse("example.yaml", doc, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	wf, err := f.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	rt, _ := flow.NewLocal("example-file", flow.Env{Resolve: func(s agent.Spec) (llm.Provider, string, error) {
		return &llm.Scripted{Replies: s.Script}, llm.ScriptedModel, nil
	}})
	in, _ := session.FromUserMessage(ctx, session.NewMemoryGraph(), "Write a haiku.")
	out, err := flow.Run(ctx, rt, wf, in)
	if err != nil {
		fmt.Println(err)
		return
	}
	cs, _ := out.Chunks(ctx)
	for _, c := range cs {
		fmt.Println(c)
	}

	// Validation errors carry the line and column.
	_, err = flowfile.Parse("bad.yaml", []byte("steps:\n  - select: {selector: r, candidates: [a]}\n"), nil)
	fmt.Println(err)
	// Output:
	// user: Write a haiku.
	// assistant: A haiku about rain.
	// assistant: Too short.
	// assistant: Too short.
	// bad.yaml:2:13: steps[0].select.max_rounds: required: a select loop must be bounded (1..100)
}
