// Package mcp exposes the tools of stdio MCP servers (Model Context
// Protocol, through the official Go SDK) as ordinary [tool.Tool] values.
//
// An agent spec names its servers ([agent.MCPServer]: name, command, args,
// env). A worker holds one [Manager]; [Manager.Tools] starts each server the
// first time it is needed, lists its tools and returns them. After that the
// server keeps running: one long-lived client session per distinct server
// spec per worker, shared by every step that names it (OpenRath starts a
// process per call instead).
//
// # Contract
//
//   - Names: a server tool reaches the model as "<server>__<tool>", the
//     server's name from the spec, two underscores, then the tool's own name
//     with every character outside [A-Za-z0-9_-] replaced by "_". A name
//     longer than 64 bytes is cut and given a short hash of the original, so
//     every name is a valid OpenAI function name. Server names cannot hold
//     "_", so the prefix is unambiguous.
//   - Parameters are the server's inputSchema; a tool without one gets
//     {"type":"object","properties":{}}.
//   - Results are flattened as OpenRath flattens them: text parts joined
//     with "\n" → {"text": …}; no content → the structuredContent, or
//     {"ok": true}; any non-text part → {"content": [parts as MCP JSON]}.
//     A result with isError: true becomes a [tool.Error] of kind
//     tool_execution_exception carrying the text, so the model sees an
//     error body ({"ok":false,…}) instead of a success.
//   - Calls to one server run in order (its tools share the resource key
//     "mcp:<server>"); calls to different servers run concurrently.
//   - A server that dies (crash, garbage on stdout, closed pipes) fails the
//     call in flight with a clear error and is restarted by the next call,
//     after an exponential backoff while it keeps failing. A server that
//     does not answer initialize within [Config.InitTimeout] is killed and
//     reported. A call that outlives its timeout is canceled and reported as
//     kind "timeout"; the server keeps running.
//   - Environment: a server gets [Config.Env] (normally just PATH and HOME)
//     plus its spec's env, never the worker's own environment, so the
//     worker's secrets do not reach it. Its stderr is kept (the last few
//     KiB) for error messages and never forwarded elsewhere.
//   - Security: MCP servers run on the worker host, outside the sandbox. A
//     worker runs only the commands [Config.AllowCommands] lists ("*" allows
//     any command, as `rathctl dev` does on a laptop); anything else is
//     refused before a process starts.
//   - [Manager.Close] closes every session, stops every server (closing its
//     stdin, then SIGTERM, then SIGKILL to its process group) and waits for
//     every goroutine it started.
//
// Tools ignore the step's sandbox ([tool.Env]): the server is the tool's
// environment.
package mcp
