# Sourced by every examples/NN_*/run.sh. It gives the example a coordinator:
#
#   - RATH_SERVER set: use that one (a `rathctl dev` you started with your own
#     OPENAI_API_KEY, or a cluster with RATH_TOKEN);
#   - otherwise: start a throwaway `rathctl dev` on a free port with its state
#     in a temporary directory, and stop it when the script exits.
#
# rathctl is $RATHCTL when set, else one built from this checkout into the
# temporary directory (the first build takes a minute on a cold machine).
# start_cluster's programs (coordinator, worker, natsd) come from $RATH_BIN
# when it holds them, else they are built the same way.
# Run the examples from the repository root: the spec paths are relative to it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" # spec paths, and an MCP server's command, are relative to the repository root
EXAMPLE_TMP=$(mktemp -d "${TMPDIR:-/tmp}/rath-example.XXXXXX")
DEV_PID=

cleanup() {
	if declare -F stop_cluster >/dev/null; then stop_cluster; fi
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

# bin NAME: the path of one of the cluster's programs, built when missing.
bin() {
	local pkg
	case "$1" in
	coordinator | worker) pkg=./cmd/$1 ;;
	natsd) pkg=./e2e/natsd ;;
	*) echo "bin: unknown program $1" >&2; exit 2 ;;
	esac
	if [ -n "${RATH_BIN:-}" ] && [ -x "$RATH_BIN/$1" ]; then
		echo "$RATH_BIN/$1"
		return
	fi
	if [ ! -x "$EXAMPLE_TMP/bin/$1" ]; then
		echo "# building $1" >&2
		go build -o "$EXAMPLE_TMP/bin/$1" "$pkg"
	fi
	echo "$EXAMPLE_TMP/bin/$1"
}

# wait_for FILE TEXT: wait up to 60s until FILE contains TEXT.
wait_for() {
	for _ in $(seq 1 240); do
		if grep -q "$2" "$1" 2>/dev/null; then return; fi
		sleep 0.25
	done
	echo "timed out waiting for \"$2\" in $1:" >&2
	cat "$1" >&2
	exit 1
}

CLUSTER_PIDS=()
WORKER_PIDS=()
# start_cluster [COORDINATOR FLAGS...]: the system as separate processes on
# this machine: a NATS server with JetStream (natsd), a SQLite store, a
# coordinator (its API is RATH_SERVER; the flags are its own, such as
# --tools), and no workers yet: add them with start_worker.
COORD_FLAGS=()
start_cluster() {
	COORD_FLAGS=("$@")
	local dir="$EXAMPLE_TMP/cluster" port
	mkdir -p "$dir"
	"$(bin natsd)" -store "$dir/jetstream" >"$dir/natsd.log" 2>&1 &
	CLUSTER_PIDS+=($!)
	wait_for "$dir/natsd.log" "^ready "
	NATS_URL=$(sed -n 's/^ready //p' "$dir/natsd.log" | head -n1)
	STORE_URL="sqlite:$dir/rath.db"
	"$RATHCTL" migrate --store "$STORE_URL" >/dev/null
	COORD_PORT=0
	export NATS_URL STORE_URL
	start_coordinator
}

# start_coordinator [FLAGS...]: (re)start the cluster's coordinator (with
# start_cluster's flags and these), with a 1s reconcile interval (so a
# restarted one takes over the workflow lease within seconds), and wait until
# its API answers. The first start takes a port the kernel chooses (--addr
# 127.0.0.1:0; a port picked beforehand can be taken by another process before
# the coordinator binds it) and reads it from the coordinator's log; a restart
# listens on the same port, so RATH_SERVER stays the same.
COORD_PID=
start_coordinator() {
	local log="$EXAMPLE_TMP/cluster/coordinator.log" seen=0 addr
	if [ -f "$log" ]; then seen=$(wc -l <"$log"); fi
	# Made here: the background job opens it for itself, maybe after the
	# loop below first reads it.
	: >>"$log"
	"$(bin coordinator)" --store "$STORE_URL" --nats "$NATS_URL" --addr "127.0.0.1:$COORD_PORT" \
		--reconcile-interval 1s ${COORD_FLAGS[@]+"${COORD_FLAGS[@]}"} "$@" >>"$log" 2>&1 &
	COORD_PID=$!
	CLUSTER_PIDS+=($!)
	for _ in $(seq 1 240); do
		addr=$(tail -n +"$((seen + 1))" "$log" | sed -n 's/.*"msg":"coordinator listening","addr":"\([^"]*\)".*/\1/p' | head -n1)
		if [ -n "$addr" ]; then
			COORD_PORT=${addr##*:}
			RATH_SERVER="http://127.0.0.1:$COORD_PORT"
			export RATH_SERVER
			if "$RATHCTL" runs list --limit 1 >/dev/null 2>&1; then
				echo "# coordinator $RATH_SERVER (pid $COORD_PID); natsd $NATS_URL; store $STORE_URL" >&2
				return
			fi
		fi
		if ! kill -0 "$COORD_PID" 2>/dev/null; then
			break # it exited: say so now
		fi
		sleep 0.25
	done
	cat "$EXAMPLE_TMP/cluster/coordinator.log" >&2
	echo "the coordinator did not answer (log above)" >&2
	exit 1
}

# kill_coordinator: SIGKILL the coordinator: no shutdown, no hand-over.
kill_coordinator() {
	kill -KILL "$COORD_PID"
	wait "$COORD_PID" 2>/dev/null || true
	echo "killed the coordinator (pid $COORD_PID) with SIGKILL"
}

# start_worker NAME [PROGRAM]: one more worker process (PROGRAM: a worker
# binary of your own, default the stock one), one step at a time.
start_worker() {
	local prog=${2:-$(bin worker)}
	"$prog" --store "$STORE_URL" --nats "$NATS_URL" --name "$1" --slots 1 --health "" \
		>"$EXAMPLE_TMP/cluster/$1.log" 2>&1 &
	WORKER_PIDS+=($!)
	CLUSTER_PIDS+=($!)
	wait_for "$EXAMPLE_TMP/cluster/$1.log" '"msg":"worker started"'
	echo "# worker $1 started (pid $!)" >&2
}

stop_cluster() {
	local i
	for ((i = ${#CLUSTER_PIDS[@]} - 1; i >= 0; i--)); do
		kill "${CLUSTER_PIDS[$i]}" 2>/dev/null || true
		wait "${CLUSTER_PIDS[$i]}" 2>/dev/null || true
	done
	CLUSTER_PIDS=()
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
		$0 ~ /^ *script: *(#.*)?$/ { skip = 1; ind = i; next }
		{ sub(/model: scripted( .*)?$/, "model: " m); print }
	' "$1" >"$out"
	echo "$out"
}
