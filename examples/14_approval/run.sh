#!/usr/bin/env bash
# 14 approval gate: the run waits before a gated tool call until a human decides.
source "$(dirname "$0")/../lib.sh"
start_dev

step "submit; the run stops before the shell command (exit code 3: waiting)"
code=0
out=$(rathctl run --agent "$(spec examples/14_approval/deployer.yaml)" --message "Tag v1.2.3" --watch) || code=$?
echo "$out"
echo "rathctl run exited $code"
if [ "$code" != 3 ]; then
	# Offline the script always asks for the shell; a real model may not.
	if [ "$code" = 0 ] && [ -n "${RATH_MODEL:-}" ]; then
		echo "the model finished without calling run_shell_command: nothing to approve"
		exit 0
	fi
	echo "expected exit code 3 (waiting)" >&2
	exit 1
fi
run=$(echo "$out" | field "run")

step "the run is waiting"
rathctl runs show "$run"

step "approve the call and watch the run finish"
rathctl approve "$run" --watch
