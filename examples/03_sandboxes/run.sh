#!/usr/bin/env bash
# 03 sandbox backends: the same agent on the local backend and on Docker.
source "$(dirname "$0")/../lib.sh"
# The docker backend's default image, built locally from Debian's busybox
# (no registry needed); a no-op when it is up to date.
"$ROOT/scripts/sandbox-image.sh"
start_dev

for backend in local docker; do
	step "the where agent on the $backend sandbox"
	out=$(rathctl run --agent "$(spec examples/03_sandboxes/where.yaml)" --message "Where do your tools run?" \
		--sandbox "$backend" --watch)
	echo "$out"
	version=$(echo "$out" | field "output version")
	step "the $backend run's shell output, from the session"
	rathctl session show "$version" | grep 'tool_result' || echo '(no tool results: the model called no tool)'
done
