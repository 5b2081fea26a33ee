#!/usr/bin/env bash
# 08 compress: a long step, a compression to one summary, a step on the summary.
source "$(dirname "$0")/../lib.sh"
start_dev

step "research, compress, plan"
out=$(rathctl run "$(spec examples/08_compress/compress.yaml)" --message "Plan a day in Kyoto" --watch)
echo "$out"
run=$(echo "$out" | field "run")
version=$(echo "$out" | field "output version")

step "the planner's transcript starts with the summary"
rathctl session show "$version"

step "its lineage: step, compress, step"
rathctl session log "$version"

step "the run's graph (mermaid)"
rathctl graph --run "$run" --format mermaid | grep -E 'v[0-9]'
