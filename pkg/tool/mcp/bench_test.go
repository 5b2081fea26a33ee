package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/mcp"
)

// BenchmarkCallWarm is one tool call through the Manager's long-lived
// session (what a Rath worker does after the first call).
func BenchmarkCallWarm(b *testing.B) {
	m, err := mcp.NewManager(mcp.Config{AllowCommands: []string{serverBin}, Env: mcp.HostEnv(os.Getenv)})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ts, err := m.Tools(context.Background(), []agent.MCPServer{spec("srv")})
	if err != nil {
		b.Fatal(err)
	}
	var echo tool.Tool
	for _, t := range ts {
		if t.Def().Name == "srv__echo" {
			echo = t
		}
	}
	args := json.RawMessage(`{"text":"hi"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := echo.Call(context.Background(), tool.Env{}, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallProcessPerCall starts the server, initializes, calls and
// stops it for every call: what OpenRath's MCP adapter does.
func BenchmarkCallProcessPerCall(b *testing.B) {
	client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "v0"}, nil)
	params := &sdk.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}
	b.ReportAllocs()
	for b.Loop() {
		cmd := exec.Command(serverBin)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cs.CallTool(context.Background(), params); err != nil {
			b.Fatal(err)
		}
		if err := cs.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
