#!/usr/bin/env bash
# 06 MCP tool: an agent calls the tools of a stdio MCP server the worker starts.
source "$(dirname "$0")/../lib.sh"

step "build the demo MCP server (pkg/tool/mcp/testdata/mcpserver) into bin/"
go build -o bin/mcpserver ./pkg/tool/mcp/testdata/mcpserver
echo "built bin/mcpserver"
start_dev

step "run the mcp-echo agent"
out=$(rathctl run --agent "$(spec examples/agents/mcp-echo.yaml)" --message "Say hi" --watch)
echo "$out"
version=$(echo "$out" | field "output version")

step "the MCP results as the session recorded them"
rathctl session show "$version" | grep 'tool_result' || echo '(no tool results: the model called no tool)'
