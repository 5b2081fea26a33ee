#!/usr/bin/env bash
# fuzz.sh [DURATION] — runs every Fuzz* target in the module for DURATION
# each (default: $FUZZTIME, else 30s). `make fuzz` runs it with
# FUZZTIME=30s; scripts/test.sh (CI) with a short time.
#
# go test -fuzz takes exactly one target, so each runs on its own with the
# anchored pattern ^FuzzX$ (a package may hold several, and FuzzX would
# otherwise also match FuzzXY). A target that fails — an input that panics
# or breaks one of its properties, or a package that does not build — fails
# the run, after every other target has had its turn; go test writes the
# failing input to the package's testdata/fuzz/FuzzX/: commit it, with the
# fix, so plain `go test` replays it from then on.
#
# Each package's test binary is built once, instrumented for fuzzing
# (go test -c -fuzz), and run per target from the package's directory with
# the flags go test -fuzz would pass: that saves a link per target, which
# dominates short runs. No vet here: test.sh runs go vet, and make fuzz is
# about inputs.
#
# FUZZ_PKGS (package patterns, default ./...) and FUZZ_MATCH (an extended
# regexp on target names, default all) narrow the run.
set -uo pipefail
cd "$(dirname "$0")/.."
time=${1:-${FUZZTIME:-30s}}
match=${FUZZ_MATCH:-.}
failed=()
n=0
start=$SECONDS
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cache=$(go env GOCACHE)/fuzz
# shellcheck disable=SC2086 # FUZZ_PKGS is a list of patterns
pkgs=$(go list -f '{{.ImportPath}} {{.Dir}}' ${FUZZ_PKGS:-./...}) || exit 1
while read -r pkg dir; do
	targets=$(grep -hoE '^func Fuzz[A-Za-z0-9_]*\([A-Za-z_]+ \*testing\.F\)' "$dir"/*_test.go 2>/dev/null |
		sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' | grep -E -- "$match" | sort -u)
	[ -n "$targets" ] || continue
	exe=$bin/$(echo "$pkg" | tr '/.' '__').test
	if ! out=$(go test -c -vet=off -fuzz "^($(echo $targets | tr ' ' '|'))\$" -o "$exe" "$pkg" 2>&1); then
		printf '%s\n' "$out"
		echo "FAIL: $pkg does not build" >&2
		failed+=("$pkg (build)")
		continue
	fi
	for f in $targets; do
		n=$((n + 1))
		echo "== $pkg $f ($time)"
		if ! out=$(cd "$dir" && "$exe" -test.run '^$' -test.fuzz "^$f\$" -test.fuzztime "$time" \
			-test.fuzzcachedir "$cache/$pkg" -test.paniconexit0 -test.timeout 10m 2>&1); then
			printf '%s\n' "$out"
			echo "FAIL: $pkg $f" >&2
			failed+=("$pkg $f")
		fi
	done
done <<<"$pkgs"
echo "fuzz.sh: $n targets, $time each, in $((SECONDS - start))s; ${#failed[@]} failed"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
if [ "$n" -eq 0 ]; then
	echo "fuzz.sh: no Fuzz targets matched" >&2
	exit 1
fi
