#!/usr/bin/env bash
# 04 built-in tools: every sandbox tool once, and a failing call as an error body.
source "$(dirname "$0")/../lib.sh"
start_dev

step "run the toolbox agent"
out=$(rathctl run --agent "$(spec examples/04_builtin_tools/tools.yaml)" \
	--message "Write a fizz program, run it, and read missing.txt" --watch)
echo "$out"
version=$(echo "$out" | field "output version")

step "the tool results, as the session recorded them"
rathctl session show "$version" | grep 'tool_result' || echo '(no tool results: the model called no tool)'

step "the workspace the run left behind"
rathctl session files "$version"
rathctl session cat "$version" src/fizz.sh || echo "(no src/fizz.sh: the model chose other files)"
