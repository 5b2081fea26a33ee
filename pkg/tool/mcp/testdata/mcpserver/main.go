// Command mcpserver is a small stdio MCP server for the tests of package
// tool/mcp. Its tools echo, fail with isError, crash the process, sleep and
// report the process's pid and environment; tally counts its executions
// in a file (MCPSERVER_TALLY) for the e2e fault tests. Flags make it misbehave at
// start: -garbage prints a non-JSON line on stdout first, -hang never
// answers initialize, -exit exits at once with a message on stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	garbage := flag.Bool("garbage", false, "print garbage on stdout before serving")
	hang := flag.Bool("hang", false, "never answer: read stdin until it closes")
	exit := flag.Int("exit", -1, "exit at once with this status")
	flag.Parse()

	switch {
	case *exit >= 0:
		fmt.Fprintln(os.Stderr, "mcpserver: told to exit at start")
		os.Exit(*exit)
	case *hang:
		buf := make([]byte, 4096)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				os.Exit(0)
			}
		}
	case *garbage:
		fmt.Println("this is not JSON-RPC")
	}

	srv := sdk.NewServer(&sdk.Implementation{Name: "mcpserver", Version: "v0.0.1"}, nil)
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(required)
		if required == nil {
			req = []byte("[]")
		}
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
	}
	text := func(s ...string) *sdk.CallToolResult {
		r := &sdk.CallToolResult{}
		for _, t := range s {
			r.Content = append(r.Content, &sdk.TextContent{Text: t})
		}
		return r
	}
	args := func(req *sdk.CallToolRequest) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}

	srv.AddTool(&sdk.Tool{Name: "echo", Description: "Echoes text.", InputSchema: obj(`"text":{"type":"string"}`, "text")},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(fmt.Sprint(args(req)["text"])), nil
		})
	srv.AddTool(&sdk.Tool{Name: "lines", Description: "Two text parts.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("first", "second"), nil
		})
	srv.AddTool(&sdk.Tool{Name: "fail", Description: "Fails with isError.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			r := text("disk on fire")
			r.IsError = true
			return r, nil
		})
	srv.AddTool(&sdk.Tool{Name: "protocol_error", Description: "Fails with a JSON-RPC error.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, fmt.Errorf("no such widget")
		})
	srv.AddTool(&sdk.Tool{Name: "crash", Description: "Exits the process.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "mcpserver: crashing as asked")
			os.Exit(3)
			return nil, nil
		})
	srv.AddTool(&sdk.Tool{Name: "sleep", Description: "Sleeps ms milliseconds.", InputSchema: obj(`"ms":{"type":"number"}`, "ms")},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ms, _ := args(req)["ms"].(float64)
			t := time.NewTimer(time.Duration(ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return text("slept"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	srv.AddTool(&sdk.Tool{Name: "pid", Description: "Reports the pid.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(fmt.Sprint(os.Getpid())), nil
		})
	srv.AddTool(&sdk.Tool{Name: "env", Description: "Reports the environment's keys.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			env := os.Environ()
			sort.Strings(env)
			return text(strings.Join(env, "\n")), nil
		})
	srv.AddTool(&sdk.Tool{Name: "structured", Description: "Structured content only.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"answer": 42}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "empty", Description: "No content.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "image", Description: "Text and an image.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "a pixel"},
				&sdk.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
			}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "dotted.name/v2", Description: "A name OpenAI refuses.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("dotted"), nil
		})
	srv.AddTool(&sdk.Tool{Name: "garble", Description: "Writes garbage to stdout.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			fmt.Println("{{{ not json")
			return text("garbled"), nil
		})

	srv.AddTool(&sdk.Tool{Name: "spawn", Description: "Starts a long sleep in a child process.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			child := exec.Command("sleep", "600")
			if err := child.Start(); err != nil {
				return nil, err
			}
			return text(fmt.Sprint(child.Process.Pid)), nil
		})
	srv.AddTool(&sdk.Tool{Name: "grow", Description: "Adds the tool grown.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			srv.AddTool(&sdk.Tool{Name: "grown", Description: "Added at run time.", InputSchema: obj("")},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("grown"), nil })
			return text("grew"), nil
		})

	srv.AddTool(&sdk.Tool{Name: "tally", Description: "Counts an execution: appends key to $MCPSERVER_TALLY; the key's first execution then holds hold_first_ms.",
		InputSchema: obj(`"key":{"type":"string"},"hold_first_ms":{"type":"number"}`, "key")},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			a := args(req)
			key := fmt.Sprint(a["key"])
			file := os.Getenv("MCPSERVER_TALLY")
			before, err := os.ReadFile(file)
			if err != nil && !os.IsNotExist(err) {
				return nil, err
			}
			first := !slices.Contains(strings.Split(string(before), "\n"), key)
			f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			// One short write with O_APPEND: lines from concurrent servers
			// do not interleave.
			_, err = f.WriteString(key + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
			if ms, _ := a["hold_first_ms"].(float64); first && ms > 0 {
				t := time.NewTimer(time.Duration(ms) * time.Millisecond)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return text("tallied " + key), nil
		})

	if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}
