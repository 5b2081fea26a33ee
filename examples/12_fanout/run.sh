#!/usr/bin/env bash
# 12 distributed fan-out: branches run on separate worker processes, then merge.
source "$(dirname "$0")/../lib.sh"

step "a cluster of processes: natsd, a coordinator, and three workers"
start_cluster
for w in worker-a worker-b worker-c; do start_worker "$w"; done

step "fan out to three researchers, merge, and let an editor join the notes"
out=$(rathctl run "$(spec examples/12_fanout/fanout.yaml)" --message "Plan a day in Kyoto" --watch)
echo "$out"
run=$(echo "$out" | field "run")
version=$(echo "$out" | field "output version")

step "which worker process ran each step"
rathctl runs show "$run"
echo "distinct workers: $(rathctl runs show "$run" | grep -oE 'worker-[abc]' | sort -u | tr '\n' ' ')"

step "the merged transcript: each branch's answer once, in branch order"
rathctl session show "$version"

step "the run's graph: three forks, their steps, two merges"
rathctl graph --run "$run" --format mermaid | grep -v classDef
