#!/usr/bin/env bash
# 13 durable run: the workflow survives its driver (the coordinator) being killed.
source "$(dirname "$0")/../lib.sh"

step "a cluster of processes: natsd, a coordinator, two workers"
start_cluster
start_worker worker-a
start_worker worker-b

step "submit the three-step workflow (no --watch: nothing on this side drives it)"
rathctl run "$(spec examples/13_durable/durable.yaml)" --message "Plan a day in Kyoto" | tee "$EXAMPLE_TMP/submit"
run=$(grep -oE 'run_[0-9a-f-]+' "$EXAMPLE_TMP/submit" | head -n1)

step "wait until the first step is running on a worker, then SIGKILL the coordinator"
for _ in $(seq 1 120); do
	if rathctl runs show "$run" | grep -qE '/1 +running'; then break; fi
	sleep 0.25
done
rathctl runs show "$run"
kill_coordinator

step "start a new coordinator: it takes the workflow lease and continues the run"
start_coordinator
rathctl runs watch "$run" | tail -n 4

step "every step ran once: one attempt, one committed version each"
rathctl runs show "$run"
echo "step versions in the run: $(rathctl session list --run "$run" | grep -c ' step ')"
