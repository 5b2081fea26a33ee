package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// ToolOffer returns the tools a coordinator lets agents name
// (coordinator.Config.Tools): the built-ins and their group, which the
// stock worker offers, plus the names extra lists (RATH_TOOLS or the
// coordinator's --tools: comma-separated tool or group names that the
// operator's own workers register, such as a worker built with
// pkg/workermain and a tool of its own). extra "*" returns nil: any name
// passes the coordinator and a worker without the tool fails the run.
// The coordinator only reads the names; it never calls these tools.
func ToolOffer(extra string) (*tool.Registry, error) {
	names := ParseMCPAllow(extra) // the same list syntax
	for _, n := range names {
		if n == "*" {
			if len(names) > 1 {
				return nil, fmt.Errorf("RATH_TOOLS: %q: \"*\" (any tool) stands alone", extra)
			}
			return nil, nil
		}
	}
	r := builtin.NewRegistry()
	for _, n := range names {
		if err := r.Register(offeredTool(n)); err != nil {
			return nil, fmt.Errorf("RATH_TOOLS: %w", err)
		}
	}
	return r, nil
}

// MCPOffer is the operator's MCP policy for a coordinator
// (coordinator.Config.MCP): the commands RATH_MCP_ALLOW lists, as the
// workers read it ([ParseMCPAllow]); unset allows none.
func MCPOffer(allow string) *coordinator.MCPPolicy {
	return &coordinator.MCPPolicy{Allow: ParseMCPAllow(allow)}
}

// offeredTool is a tool a worker offers, known to the coordinator by name.
type offeredTool string

func (t offeredTool) Def() tool.Def {
	return tool.Def{Name: string(t), Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (t offeredTool) ResourceKey(json.RawMessage) string { return string(t) }

func (t offeredTool) Call(context.Context, tool.Env, json.RawMessage) (any, error) {
	return nil, fmt.Errorf("tool %s runs on the workers, not on the coordinator", string(t))
}
