#!/usr/bin/env bash
# jaeger.sh — a Jaeger v2 binary for the tracing e2e test, built once.
#
# Builds github.com/jaegertracing/jaeger/cmd/jaeger (v1.76.0, the newest
# version the Go module proxy offers; its tree holds Jaeger v2) into a cache
# directory and prints `export RATH_TEST_JAEGER_BIN=...` for eval. A cached
# binary is reused, so only the first run pays for the build (several
# minutes on two cores). `go install` refuses the module (its go.mod has
# replace directives), so it is built as a tool of a throwaway module.
#
# RATH_TEST_JAEGER_DIR overrides the cache directory (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/rath/jaeger-v1.76.0).
set -euo pipefail

version=v1.76.0
dir=${RATH_TEST_JAEGER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rath/jaeger-$version}
bin=$dir/jaeger

if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	echo "jaeger.sh: building Jaeger $version into $dir (first run only; several minutes)" >&2
	(
		cd "$work"
		go mod init rath.local/jaegerbuild >/dev/null 2>&1
		GOFLAGS=-mod=mod go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >&2
		GOFLAGS=-mod=mod go build -o "$bin.tmp.$$" github.com/jaegertracing/jaeger/cmd/jaeger >&2
	)
	# A temporary name of this run's own: two runs building at once each
	# move a whole binary into place.
	mv "$bin.tmp.$$" "$bin"
fi
echo "export RATH_TEST_JAEGER_BIN='$bin'"
