// Package llm talks to language models: the [Provider] seam the agent loop
// calls, an [OpenAI] provider for every OpenAI-compatible endpoint, the
// offline [Scripted] model, and [Resolve], which picks a provider from an
// explicit spec, the environment and the config file in OpenRath's order.
//
// # Messages
//
// [MessagesFromChunks] maps a transcript to chat messages exactly as
// OpenRath does: system, user and assistant chunks keep their role (an
// assistant's tool calls go with it), a tool_result becomes role "tool"
// with its tool_call_id (the tool's name is not sent), a summary is sent as
// a user message (as OpenRath's compressor writes it), and Rath's evidence
// kinds are records for people, never sent. The agent's instructions are
// not part of the transcript: the caller puts them in front.
//
// [Response.Chunk] turns a reply back into one assistant chunk. Providers
// normalise replies so that chunk is always valid: every tool call has an
// id, the type "function" and a name, and the finish reason is one of the
// Finish constants.
//
// # Errors and retries
//
// Every error from a provider in this package matches exactly one of
// [ErrTransient] (a later retry may succeed: rate limits, 5xx, connection
// failures, timeouts, truncated or malformed replies, a canceled context)
// and [ErrPermanent] (it will not: other 4xx, invalid requests or
// configuration, an exhausted script), and is an [*Error] carrying the HTTP
// status, the endpoint's error type and code, the attempts made and any
// Retry-After. [OpenAI] has already retried transient failures with
// exponential backoff and full jitter, honoring Retry-After; a worker that
// still gets ErrTransient should retry the step later, and fail it on
// ErrPermanent. API keys never appear in errors.
//
// # Streaming
//
// Providers that stream implement [Streamer]. Text deltas reach onDelta in
// order; the final [Response] is what Chat would have returned, with tool
// calls reassembled from their fragments and usage from the final chunk.
//
// # The scripted model
//
// [Scripted] answers from a list of [ScriptReply] values (load one with
// [LoadScript]). The reply is chosen by counting the assistant messages in
// the request, not by counting calls, so a retried or redelivered step gets
// the same reply and the model needs no state: the same transcript always
// gets the same answer, with deterministic usage.
//
// # Configuration
//
// Only cmd/ reads the environment: [Resolve] takes a getenv function. The
// config file ($RATH_HOME/config.yaml or ~/.rath/config.yaml) holds
// providers by name and is refused unless only its owner can read it.
// docs/models.md documents all of it for users.
//
// # Testing
//
// Package llmtest is a fake OpenAI-compatible server speaking the real wire
// format, with fault injection, for testing code that calls models.
package llm
