// Command customworker is a Rath worker with a Go tool of its own, built in
// a module of its own (this directory's go.mod), the way a user's project
// would: it imports only Rath's public packages. It is the stock worker
// (same flags and environment) plus one tool, season_for, which agents name
// in their spec's tools.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
	"github.com/rath-run/rath/pkg/workermain"
)

// seasonFor answers which season a month falls in, and what Kyoto is known
// for then. It touches nothing outside the process.
type seasonFor struct{}

func (seasonFor) Def() tool.Def {
	return tool.Def{
		Name:        "season_for",
		Description: "The season of a month (1-12) in Kyoto and what the city is known for then.",
		Parameters: json.RawMessage(`{
			"type": "object",
			"properties": {"month": {"type": "integer", "minimum": 1, "maximum": 12}},
			"required": ["month"],
			"additionalProperties": false
		}`),
	}
}

// ResourceKey: calls share no state, so every call may run concurrently.
func (seasonFor) ResourceKey(args json.RawMessage) string { return "season_for:" + string(args) }

func (seasonFor) Call(_ context.Context, _ tool.Env, args json.RawMessage) (any, error) {
	var in struct {
		Month int `json:"month"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, fmt.Errorf("season_for: %w", err)
	}
	seasons := []struct{ name, known string }{
		{"winter", "quiet temples and yudofu"},
		{"spring", "cherry blossoms along the Philosopher's Path"},
		{"summer", "the Gion Matsuri"},
		{"autumn", "red maples at Tofuku-ji"},
	}
	s := seasons[(in.Month%12)/3]
	return map[string]any{"month": in.Month, "season": s.name, "known_for": strings.ToUpper(s.known[:1]) + s.known[1:]}, nil
}

func main() {
	reg := builtin.NewRegistry() // the six built-ins and their "builtin" group
	if err := reg.Register(seasonFor{}); err != nil {
		log.Fatal(err)
	}
	workermain.Main(workermain.Options{Tools: reg})
}
