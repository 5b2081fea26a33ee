package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/tool"
)

// Separator joins a server's name and its tool's name.
const Separator = "__"

// maxNameBytes is OpenAI's limit on a function name.
const maxNameBytes = 64

// emptySchema is the parameters of a tool that declares none.
var emptySchema = []byte(`{"type":"object","properties":{}}`)

// ToolName returns the name the model sees for a server's tool: server,
// [Separator], then the tool's name with every character outside
// [A-Za-z0-9_-] replaced by "_". A longer name than 64 bytes is cut and ends in "_" and
// eight hex digits of the SHA-256 of the tool's own name, so distinct long
// names stay distinct.
func ToolName(server, name string) string {
	var b strings.Builder
	b.WriteString(server)
	b.WriteString(Separator)
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	full := b.String()
	if len(full) <= maxNameBytes {
		return full
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:4])
	return full[:maxNameBytes-len(suffix)] + suffix
}

func newRemoteTool(t *sdk.Tool) (*remoteTool, error) {
	if t.Name == "" {
		return nil, errors.New("no name")
	}
	schema := emptySchema
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("inputSchema: %w", err)
		}
		if string(b) != "null" {
			schema = b
		}
	}
	return &remoteTool{name: t.Name, description: t.Description, schema: schema}, nil
}

// mcpTool is one server tool as a [tool.Tool].
type mcpTool struct {
	m       *Manager
	spec    agent.MCPServer
	key     string
	remote  *remoteTool
	timeout time.Duration
}

func (t *mcpTool) Def() tool.Def {
	return tool.Def{
		Name:        ToolName(t.spec.Name, t.remote.name),
		Description: t.remote.description,
		Parameters:  json.RawMessage(t.remote.schema),
	}
}

// ResourceKey serializes calls to one server: a stdio server answers one
// stream, and its tools may share state.
func (t *mcpTool) ResourceKey(json.RawMessage) string { return "mcp:" + t.spec.Name }

// Call calls the tool on its server, starting the server if it is not
// running.
func (t *mcpTool) Call(ctx context.Context, _ tool.Env, args json.RawMessage) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	s, err := t.m.acquire(t.spec)
	if err != nil {
		return nil, t.fail(err)
	}
	ok := false
	defer func() { s.release(ok) }()
	c, err := s.session(ctx)
	if err != nil {
		return nil, t.fail(err)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &sdk.CallToolParams{Name: t.remote.name, Arguments: args}
	res, err := c.cs.CallTool(ctx, params)
	if errors.Is(err, sdk.ErrConnectionClosed) && s.awaitEnd(ctx, c) {
		// The connection had already broken, so the request was never
		// sent: start the server again and send it once more.
		if c, err = s.session(ctx); err != nil {
			return nil, t.fail(err)
		}
		res, err = c.cs.CallTool(ctx, params)
	}
	if err != nil {
		return nil, t.fail(s.callError(ctx, c, "calling "+t.remote.name, err))
	}
	ok = true
	return flatten(res)
}

// fail turns err into a tool error body, naming the server.
func (t *mcpTool) fail(err error) error {
	kind := tool.KindExecution
	if errors.Is(err, context.DeadlineExceeded) {
		kind = tool.KindTimeout
	}
	return &tool.Error{Kind: kind, Message: fmt.Sprintf("mcp server %s: %v", t.spec.Name, err)}
}

// flatten turns a result into the tool_result body, as OpenRath does (see
// the package doc); isError becomes a tool.Error.
func flatten(res *sdk.CallToolResult) (any, error) {
	if res == nil {
		return map[string]any{"ok": true}, nil
	}
	var texts []string
	allText := true
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			texts = append(texts, tc.Text)
		} else {
			allText = false
		}
	}
	if res.IsError {
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "the tool reported an error"
		}
		e := &tool.Error{Kind: tool.KindExecution, Message: msg}
		if !allText || (len(res.Content) == 0 && res.StructuredContent != nil) {
			e.Detail = detail(res)
		}
		return nil, e
	}
	switch {
	case len(res.Content) == 0 && res.StructuredContent != nil:
		return res.StructuredContent, nil
	case len(res.Content) == 0:
		return map[string]any{"ok": true}, nil
	case allText:
		return map[string]any{"text": strings.Join(texts, "\n")}, nil
	}
	return map[string]any{"content": res.Content}, nil
}

func detail(res *sdk.CallToolResult) any {
	if len(res.Content) == 0 {
		return res.StructuredContent
	}
	return map[string]any{"content": res.Content}
}
