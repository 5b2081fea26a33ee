#!/usr/bin/env bash
# test.sh — the whole test suite, as `make test` and CI run it.
# Starts what the tests need (a private PostgreSQL cluster, the docker
# sandbox image), runs every Go test with the race detector, and stops what
# it started.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each script's output is taken first, then evaluated: `eval "$(…)"` would
# go on after a failed script (eval of its empty output succeeds).
pg_env=$(scripts/testpg.sh start)
eval "$pg_env"
trap 'scripts/testpg.sh stop' EXIT
export RATH_TEST_DATABASE_URL RATH_TEST_PG_BIN
# Jaeger v2 for the tracing e2e (e2e/jaeger_test.go): built once from the
# Go module proxy into a cache directory (several minutes the first time),
# reused after. A failed build fails the run; the test never skips.
jaeger_env=$(scripts/jaeger.sh)
eval "$jaeger_env"
export RATH_TEST_JAEGER_BIN
# The docker sandbox tests' image, built locally (no registry); a no-op
# without a Docker Engine or when the image is current.
scripts/sandbox-image.sh
# Debian packages the tests drive: chromium (the web UI's browser test,
# headless) and the sqlite3 shell (the lineage guide's SQLite queries are
# checked in it as users type them).
need_pkg() { # need_pkg COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y --no-install-recommends "$2" >/dev/null 2>&1 ||
      { apt-get update >/dev/null && apt-get install -y --no-install-recommends "$2" >/dev/null; } && return
  fi
  echo "test.sh: could not install $2; the tests that need $1 fail" >&2
}
need_pkg chromium chromium
need_pkg sqlite3 sqlite3

go vet ./...
go test -race -count=1 -timeout 40m ${RATH_TEST_FLAGS:-} ./...
# Every fuzzer for a moment beyond its seed corpus (which go test just ran):
# RATH_TEST_FUZZTIME each, default 300x (executions, not seconds: a time
# limit can run out while the fuzzer is still replaying its seed corpus on
# a loaded machine, which Go reports as a failure); an input that panics or breaks a
# property fails the run (docs/RELIABILITY.md, "Bad input").
scripts/fuzz.sh "${RATH_TEST_FUZZTIME:-300x}"
# The deployment files' tests: a module of their own (deploy/go.mod) so the
# Kubernetes and Compose libraries stay out of the main module.
(cd deploy && go vet ./... && go test -race -count=1 ${RATH_TEST_FLAGS:-} ./...)
