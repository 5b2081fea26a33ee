// Package e2e holds Rath's multi-process fault tests. They build the real
// binaries (coordinator, worker, rathctl, and natsd: a nats-server with
// JetStream from the nats-server/v2 module), start them as separate
// processes against a Postgres database of their own (internal/testdb),
// drive them with the built rathctl, and break them: SIGKILL a worker in
// the middle of a step, restart the coordinator and the NATS server, cut a
// worker off from Postgres. Each test checks that the run completes and
// that its step committed exactly one version.
//
// Without RATH_TEST_DATABASE_URL the tests skip, unless
// RATH_REQUIRE_POSTGRES=1 (CI), where they fail; `make test` provides it.
package e2e
