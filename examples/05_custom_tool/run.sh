#!/usr/bin/env bash
# 05 custom tool: a worker with a Go tool of its own, built in its own module.
source "$(dirname "$0")/../lib.sh"

step "build the custom worker: a module of its own (go.mod here) using Rath's public packages"
(cd examples/05_custom_tool && go build -o "$EXAMPLE_TMP/bin/customworker" .)
echo "built customworker from examples/05_custom_tool ($(sed -n 's/^module //p' examples/05_custom_tool/go.mod))"

step "a cluster of processes: natsd, a coordinator told the workers offer season_for (--tools), and the custom worker"
start_cluster --tools season_for
start_worker custom "$EXAMPLE_TMP/bin/customworker"

step "a spec naming a tool no worker offers is refused at submit, at its line"
sed 's/\[season_for\]/[season_fro]/' examples/05_custom_tool/seasons.yaml >"$EXAMPLE_TMP/typo.yaml"
rathctl run --agent "$EXAMPLE_TMP/typo.yaml" --message "When?" 2>&1 | sed "s|$EXAMPLE_TMP/||" || echo "exit ${PIPESTATUS[0]}"

step "run an agent that calls season_for"
out=$(rathctl run --agent "$(spec examples/05_custom_tool/seasons.yaml)" --message "When should I visit Kyoto?" --watch)
echo "$out"
version=$(echo "$out" | field "output version")

step "the custom tool's results, as the session recorded them"
rathctl session show "$version" | grep 'tool_result' || echo '(no tool results: the model called no tool)'
