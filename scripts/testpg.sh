#!/usr/bin/env bash
# testpg.sh start|stop|url — a private PostgreSQL cluster for the tests.
#
# start: installs Debian's postgresql if no server binaries are found (root
# only), initialises a throwaway cluster under $RATH_TEST_PG_DIR (default
# /tmp/rath-test-pg) on a free loopback port, starts it and prints
# `export RATH_TEST_DATABASE_URL=...` for eval. Idempotent: a running cluster
# is reused.
# RATH_TEST_PG_OPTS adds server options (-c name=value ...) when the
# cluster is first started (scripts/bench-cluster.sh loads
# pg_stat_statements with it).
# stop: stops the cluster and removes its directory.
set -euo pipefail

dir=${RATH_TEST_PG_DIR:-/tmp/rath-test-pg}
user=rath

pgbin() {
	local b
	for b in /usr/lib/postgresql/*/bin; do
		[ -x "$b/initdb" ] && { echo "$b"; return 0; }
	done
	return 1
}

ensure_installed() {
	pgbin >/dev/null && return 0
	if [ "$(id -u)" != 0 ]; then
		echo "testpg: PostgreSQL server binaries not found and not root to install them (apt-get install postgresql)" >&2
		return 1
	fi
	echo "testpg: installing postgresql from Debian's packages" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
	# Debian's package starts a system cluster; the tests use their own.
	command -v pg_ctlcluster >/dev/null && pg_ctlcluster --force "$(ls "$(dirname "$(dirname "$(pgbin)")")" | head -1)" main stop >/dev/null 2>&1 || true
	pgbin >/dev/null
}

# as runs a command as the cluster's owner: postgres refuses to run as root.
as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}

start() {
	ensure_installed
	local bin port
	bin=$(pgbin)
	if [ -f "$dir/port" ] && as "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		port=$(cat "$dir/port")
	else
		rm -rf "$dir"
		mkdir -p "$dir"
		[ "$(id -u)" = 0 ] && chown postgres: "$dir"
		as "$bin/initdb" -D "$dir/data" -U "$user" --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; return 1; }
		port=$(free_port)
		echo "$port" >"$dir/port.tmp"
		[ "$(id -u)" = 0 ] && chown postgres: "$dir/port.tmp"
		mv "$dir/port.tmp" "$dir/port"
		# fsync stays on: the benchmarks compare against real commit rates.
		as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
			-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=256MB ${RATH_TEST_PG_OPTS:-}" start >&2 ||
			{ cat "$dir/server.log" >&2; return 1; }
	fi
	echo "export RATH_TEST_DATABASE_URL='postgres://$user@127.0.0.1:$port/postgres?sslmode=disable'"
	echo "export RATH_TEST_PG_BIN='$bin'"
}

stop() {
	local bin
	bin=$(pgbin) || return 0
	[ -d "$dir/data" ] && as "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
