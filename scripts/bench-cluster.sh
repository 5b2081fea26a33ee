#!/usr/bin/env bash
# bench-cluster.sh — rathctl bench's steps scenario against a cluster of
# separate processes on this machine, in one command (make bench-cluster).
#
# It builds coordinator, worker, rathctl and nats-server from this tree,
# starts the test Postgres (scripts/testpg.sh), and for each of RUNS runs:
# a fresh migrated database, `nats-server -js` on a fresh store directory,
# a coordinator with --auth required, WORKERS workers with SLOTS slots
# connected as rath_worker (row-level security on, as in production), a
# WARM warm-up, then `rathctl bench --scenario steps` with --process for
# every process, so the report prints CPU a step for the coordinator, each
# worker, NATS and the Postgres backends, and the limits (pgbench, the
# in-process commit loop, JetStream) measured in the same run. Everything
# it starts it stops; the database of each run is dropped.
#
# Settings (environment): WORKERS (1), SLOTS (16), CONCURRENCY (16),
# DURATION (10s), WARM (2s), RUNS (1), OUT (a temporary directory: each
# run's bench.txt, report.json, statements.txt (pg_stat_statements),
# NATS' connz.json and varz.json, and process logs), MODEL_LATENCY (0),
# PGDIR (/tmp/rath-bench-cluster-pg: the Postgres cluster's directory),
# STORE_PARAMS (query parameters added to the coordinator's and workers'
# store URLs, e.g. pool_max_conns=4), PROCS (GOMAXPROCS of the
# coordinator, the workers and NATS, not of the load generator: 1 runs
# them as the Kubernetes manifests do for a CPU request of a core or less;
# unset, Go's default, one per core), BIN (a directory of coordinator,
# worker, rathctl and nats-server built before, to compare builds;
# default: build this tree's into OUT/bin).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

workers=${WORKERS:-1}
slots=${SLOTS:-16}
concurrency=${CONCURRENCY:-16}
duration=${DURATION:-10s}
warm=${WARM:-2s}
runs=${RUNS:-1}
latency=${MODEL_LATENCY:-0}
out=${OUT:-$(mktemp -d /tmp/rath-bench-cluster.XXXXXX)}
bin=${BIN:-$out/bin}
if [ -z "${BIN:-}" ]; then
	echo "bench-cluster: building into $bin" >&2
	mkdir -p "$bin"
	go build -o "$bin/" ./cmd/coordinator ./cmd/worker ./cmd/rathctl
	go build -o "$bin/nats-server" github.com/nats-io/nats-server/v2
fi
mkdir -p "$out"
# The cluster's processes start through env (which execs them, so $! is
# their pid), with PROCS as their GOMAXPROCS when it is set.
goenv=(env)
if [ -n "${PROCS:-}" ]; then
	goenv=(env "GOMAXPROCS=$PROCS")
fi

# A Postgres of its own (PGDIR), with pg_stat_statements loaded so the
# report counts statements a step; it is left running for the next call
# (scripts/testpg.sh stop with RATH_TEST_PG_DIR set stops it).
export RATH_TEST_PG_DIR=${PGDIR:-/tmp/rath-bench-cluster-pg}
export RATH_TEST_PG_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
eval "$(scripts/testpg.sh start)"
pgbin=$RATH_TEST_PG_BIN
admin=$RATH_TEST_DATABASE_URL

# free_ports N: N distinct free ports on 127.0.0.1, one a line. Every
# socket stays bound until all are, so no two can be the same port (two
# calls one after the other can be: the kernel may hand a closed port out
# again at once).
free_ports() {
	python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print("\n".join(str(s.getsockname()[1]) for s in ss))' "$1" 2>/dev/null && return
	# No python3: N consecutive ports from a random base.
	local base=$((20000 + RANDOM % 20000)) i
	for ((i = 0; i < $1; i++)); do echo $((base + i)); done
}

# dburl NAME [QUERY]: the admin URL on database NAME, with extra query
# parameters appended.
dburl() {
	local base=${admin%%\?*} query=${admin#*\?}
	[ "$query" = "$admin" ] && query=
	base=${base%/*}/$1
	echo "$base?${query}${2:+&$2}"
}

# wait_http URL: until it answers 200, at most 30 s.
wait_http() {
	local i
	for i in $(seq 300); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench-cluster: $1 did not come up" >&2
	return 1
}

pids=()
stop_all() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap stop_all EXIT

for run in $(seq "$runs"); do
	dir=$out/run$run
	mkdir -p "$dir"
	db=rath_bench_cluster_$$_$run
	"$pgbin/psql" -q "$admin" -c "CREATE DATABASE $db"
	store=$(dburl "$db")
	"$bin/rathctl" migrate --store "$store" >"$dir/migrate.log" 2>&1
	"$pgbin/psql" -q "$store" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
	# The token alone goes to stdout (its id and scope to stderr).
	token=$("$bin/rathctl" token create --store "$store" --scope admin --name bench 2>"$dir/token.log")

	# The cluster's ports: NATS, its monitor, the coordinator's API and
	# health, then one health port a worker.
	mapfile -t ports < <(free_ports $((4 + workers)))
	nport=${ports[0]} mport=${ports[1]}
	"${goenv[@]}" "$bin/nats-server" -js -a 127.0.0.1 -p "$nport" -sd "$dir/nats" -m "$mport" >"$dir/nats.log" 2>&1 &
	npid=$!
	pids+=("$npid")
	nats=nats://127.0.0.1:$nport

	cport=${ports[2]} chealth=${ports[3]}
	"${goenv[@]}" "$bin/coordinator" --addr "127.0.0.1:$cport" --health-addr "127.0.0.1:$chealth" \
		--auth required --store "$(dburl "$db" "${STORE_PARAMS:-}")" --nats "$nats" >"$dir/coordinator.log" 2>&1 &
	cpid=$!
	pids+=("$cpid")
	wait_http "http://127.0.0.1:$chealth/readyz"

	procs=(--process "coordinator=pid:$cpid" --process "nats=pid:$npid")
	for w in $(seq "$workers"); do
		"${goenv[@]}" "$bin/worker" --name "bench-w$w" --slots "$slots" --health "127.0.0.1:${ports[3 + w]}" \
			--store "$(dburl "$db" "role=rath_worker${STORE_PARAMS:+&$STORE_PARAMS}")" --nats "$nats" >"$dir/worker$w.log" 2>&1 &
		pids+=("$!")
		procs+=(--process "worker$w=pid:$!")
	done

	echo "bench-cluster: run $run of $runs: $workers worker(s) x $slots slots, $concurrency in flight, warm-up $warm, GOMAXPROCS ${PROCS:-unset}" >&2
	RATH_TOKEN=$token "$bin/rathctl" bench --server "http://127.0.0.1:$cport" --store "$store" --nats "$nats" \
		--scenario steps --duration "$warm" --concurrency "$concurrency" --model-latency "$latency" >"$dir/warm.txt" 2>&1
	RATH_TOKEN=$token "$bin/rathctl" bench --server "http://127.0.0.1:$cport" --store "$store" --nats "$nats" \
		--scenario steps --duration "$duration" --concurrency "$concurrency" --model-latency "$latency" \
		"${procs[@]}" --json "$dir/report.json" | tee "$dir/bench.txt"

	# What NATS carried, connection by connection (messages in and out).
	curl -fsS "http://127.0.0.1:$mport/connz" >"$dir/connz.json" || true
	curl -fsS "http://127.0.0.1:$mport/varz" >"$dir/varz.json" || true
	stop_all
	# Where the Postgres time went, statement by statement (the warm-up
	# included; the migration's DDL and the limits' probes, which are not
	# a step's, left out).
	"$pgbin/psql" -q "$store" -P pager=off -c "SELECT calls, rows, round(total_exec_time) AS exec_ms,
		round(total_plan_time) AS plan_ms, round(mean_exec_time * 1000) AS mean_us,
		regexp_replace(left(query, 160), '\s+', ' ', 'g') AS query
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND query !~* '^\s*(CREATE|ALTER|DROP|DO|COMMENT|GRANT|REVOKE|ANALYZE)\M' AND query NOT LIKE '%rath_bench_%'
		ORDER BY total_exec_time DESC LIMIT 40" >"$dir/statements.txt"
	"$pgbin/psql" -q "$admin" -c "DROP DATABASE $db WITH (FORCE)"
done
echo "bench-cluster: reports and logs in $out" >&2
