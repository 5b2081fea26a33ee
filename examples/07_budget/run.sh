#!/usr/bin/env bash
# 07 streaming and usage, with a token budget that stops the run.
source "$(dirname "$0")/../lib.sh"
start_dev

step "count to five with a budget of 150 tokens"
out=$(rathctl run --agent "$(spec examples/07_budget/counter.yaml)" --message "Count to five" \
	--max-tokens 150 --watch)
echo "$out"
version=$(echo "$out" | field "output version")

step "the end of the transcript: the call the budget did not run, and the note"
rathctl session show "$version" | tail -n 3
