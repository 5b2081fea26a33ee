package coordinator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/mcp"
)

// MCPPolicy is the operator's MCP policy, the one the workers enforce
// (RATH_MCP_ALLOW, internal/app.ParseMCPAllow): the commands an agent's MCP
// servers may run, exactly as a spec writes them; "*" allows any. An empty
// list allows none.
type MCPPolicy struct {
	Allow []string
}

// Allows reports whether an MCP server may run command.
func (p *MCPPolicy) Allows(command string) bool { return mcp.Allowed(p.Allow, command) }

// checkOffer refuses a spec that names a tool the deployment's workers do
// not offer ([Config.Tools]) or an MCP server whose command the operator's
// MCP policy does not allow ([Config.MCP]). The error names the spec's
// field: "tools[2]: unknown tool \"foo\" (…)", "mcp[0].command: …". A nil
// Tools or MCP checks nothing of its kind.
func (c *Coordinator) checkOffer(spec agent.Spec) error {
	if c.cfg.Tools != nil && len(spec.Tools) > 0 {
		if _, err := c.cfg.Tools.Select(spec.Tools); err != nil {
			if !errors.Is(err, tool.ErrUnknownTool) {
				return err
			}
			// "tools[2]: rath: unknown tool "foo" (available: …)", said
			// for the spec's author.
			msg := strings.Replace(err.Error(), tool.ErrUnknownTool.Error(), "unknown tool", 1)
			msg = strings.Replace(msg, "(available: ", "(the workers offer: ", 1)
			return errors.New(msg + "; an operator whose workers offer more lists them with the coordinator's --tools (RATH_TOOLS)")
		}
	}
	if p := c.cfg.MCP; p != nil {
		for i, s := range spec.MCP {
			if !p.Allows(s.Command) {
				allowed := "none"
				if len(p.Allow) > 0 {
					allowed = strings.Join(p.Allow, ", ")
				}
				return fmt.Errorf("mcp[%d].command: %q is not allowed by the operator's MCP policy (RATH_MCP_ALLOW allows: %s)", i, s.Command, allowed)
			}
		}
	}
	return nil
}
