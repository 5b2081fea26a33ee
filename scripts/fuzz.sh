#!/usr/bin/env bash
# fuzz.sh DURATION — runs every Fuzz* target in the module for DURATION each.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-30s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "== $pkg $f ($time)"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "$time" "$pkg"
	done
done
