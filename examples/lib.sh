# Sourced by every examples/NN_*/run.sh. It gives the example a coordinator:
#
#   - RATH_SERVER set: use that one (a `rathctl dev` you started with your own
#     OPENAI_API_KEY, or a cluster with RATH_TOKEN);
#   - otherwise: start a throwaway `rathctl dev` on a free port with its state
#     in a temporary directory, and stop it when the script exits.
#
# rathctl is $RATHCTL when set, else one built from this checkout into the
# temporary directory (the first build takes a minute on a cold machine).
# Run the examples from the repository root: the spec paths are relative to it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" # spec paths, and an MCP server's command, are relative to the repository root
EXAMPLE_TMP=$(mktemp -d "${TMPDIR:-/tmp}/rath-example.XXXXXX")
DEV_PID=

cleanup() {
	if [ -n "$DEV_PID" ]; then
		kill "$DEV_PID" 2>/dev/null || true
		wait "$DEV_PID" 2>/dev/null || true
	fi
	rm -rf "$EXAMPLE_TMP"
}
trap cleanup EXIT

if [ -z "${RATHCTL:-}" ]; then
	echo "# building rathctl (first build takes a minute)" >&2
	(cd "$ROOT" && go build -o "$EXAMPLE_TMP/bin/rathctl" ./cmd/rathctl)
	RATHCTL="$EXAMPLE_TMP/bin/rathctl"
fi
rathctl() { "$RATHCTL" "$@"; }

# start_dev [dev flags...]: start a private dev stack unless RATH_SERVER names one.
start_dev() {
	if [ -n "${RATH_SERVER:-}" ]; then
		echo "# using the coordinator at $RATH_SERVER" >&2
		return
	fi
	"$RATHCTL" dev --addr 127.0.0.1:0 --dir "$EXAMPLE_TMP/.rath" -o json "$@" \
		>"$EXAMPLE_TMP/dev.json" 2>"$EXAMPLE_TMP/dev.log" &
	DEV_PID=$!
	for _ in $(seq 1 240); do
		if [ -s "$EXAMPLE_TMP/dev.json" ]; then
			RATH_SERVER=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$EXAMPLE_TMP/dev.json")
			export RATH_SERVER
			echo "# rathctl dev on $RATH_SERVER" >&2
			return
		fi
		if ! kill -0 "$DEV_PID" 2>/dev/null; then
			cat "$EXAMPLE_TMP/dev.log" >&2
			echo "rathctl dev did not start" >&2
			exit 1
		fi
		sleep 0.25
	done
	echo "rathctl dev did not answer in 60s" >&2
	exit 1
}

# stop_dev: stop the stack start_dev started (its state directory stays, so
# a second start_dev opens the same store). Does nothing for a RATH_SERVER
# the caller named.
stop_dev() {
	if [ -z "$DEV_PID" ]; then
		return
	fi
	kill "$DEV_PID" 2>/dev/null || true
	wait "$DEV_PID" 2>/dev/null || true
	DEV_PID=
	rm -f "$EXAMPLE_TMP/dev.json"
	unset RATH_SERVER
	echo "# rathctl dev stopped" >&2
}

# step TEXT: print a heading so the output reads as a walk-through.
step() { printf '\n== %s\n' "$*"; }

# field NAME: read "NAME VALUE" lines (rathctl's text output) from stdin and
# print the first VALUE, e.g. `rathctl run ... --watch | field "output version"`.
field() { sed -n "s/^$1  *\([^ ]*\).*/\1/p" | head -n1; }

# spec FILE: the spec or workflow file to submit. Offline that is FILE itself
# (its agents use the scripted model). With RATH_MODEL set (e.g. gpt-4o-mini),
# a copy in which every `model: scripted` names RATH_MODEL and the `script:`
# blocks are dropped, so the same example runs against a real endpoint.
spec() {
	if [ -z "${RATH_MODEL:-}" ]; then
		echo "$1"
		return
	fi
	local out
	out="$EXAMPLE_TMP/$(basename "$1")"
	awk -v m="$RATH_MODEL" '
		{ match($0, /^ */); i = RLENGTH }
		skip { if ($0 ~ /^ *$/ || i > ind || ($0 ~ /^ *- / && i == ind)) next; skip = 0 }
		$0 ~ /^ *script: *$/ { skip = 1; ind = i; next }
		{ sub(/model: scripted( .*)?$/, "model: " m); print }
	' "$1" >"$out"
	echo "$out"
}
