// Command worker pulls step jobs from JetStream, runs agents and commits new
// session versions. Configuration comes from flags and the environment:
//
//	RATH_STORE      store URL (postgres://… or sqlite:PATH)        --store
//	NATS_URL        NATS server URL (default nats://127.0.0.1:4222) --nats
//	RATH_NATS_REPLICAS replicas of the JetStream streams (default 1) --nats-replicas
//	RATH_EVENTS_MAX_BYTES bound of the events stream, oldest dropped first
//	                 (default 256MiB; same on every process)         --events-max-bytes
//	RATH_QUEUE      job queue (default "default")                   --queue
//	RATH_SLOTS      concurrent steps (default 4)                    --slots
//	RATH_HEALTH     health listen address (default :7421)           --health
//	                (serves /healthz, /readyz and Prometheus /metrics)
//	OTEL_EXPORTER_OTLP_ENDPOINT  OTLP/HTTP trace collector (unset: no tracing)
//	OTEL_SERVICE_NAME            service name (default rath-worker)
//	RATH_LOG_FORMAT, RATH_LOG_LEVEL  json (default) or text; info (default)
//	RATH_NATS_USER, RATH_NATS_PASSWORD (or _FILE), RATH_NATS_CREDS: NATS
//	                credentials of the worker role (docs/security.md)
//
// --ack-wait sets the queue consumer's ack deadline (default 30s) and
// --heartbeat how often a running step extends it (default the shorter of
// 5s and a third of the ack wait; one at or over the ack wait is refused).
//
// RATH_SANDBOX_POLICY (--sandbox-policy) is the operator's sandbox policy, a
// YAML file naming the backends tenants' tools may run on and what a docker
// sandbox may be; without one, a worker on Postgres runs tools only in
// docker containers with no network, and one on SQLite also on "local"
// (docs/sandboxes.md).
//
// Model credentials come from OPENAI_API_KEY and friends (docs/models.md).
// RATH_SCRIPT_DIR names the directory whose files specs may name as
// model scripted:<name> (unset: that form is refused); RATH_MODELS lists
// further models that get their own metrics label (others are "other").
// Secrets may be given as NAME_FILE (RATH_STORE_FILE, OPENAI_API_KEY_FILE,
// …; app.FileSecrets); those in the environment or in --store/--nats are
// taken out of the process's environment block and command line at start
// (app.HideSecrets), so no tool reads them from /proc.
// RATH_LOCAL_USER ("uid:gid", default 65534:65534) is the user a root
// worker runs local tools as; RATH_WORKSPACE_MAX_BYTES also limits each
// workspace while tools run (docs/sandboxes.md).
// RATH_MCP_ALLOW lists the MCP server commands agent specs may run on this
// host (comma-separated, "*" for any; unset: none; docs/tools.md).
// SIGTERM stops pulling, lets steps finish within --shutdown-timeout, and
// exits 0.
//
// The program is package workermain (pkg/workermain) with no options; a
// worker with Go tools of its own is the same call with a tool registry,
// from any module (examples/05_custom_tool).
package main

import "github.com/rath-run/rath/pkg/workermain"

func main() { workermain.Main(workermain.Options{}) }
