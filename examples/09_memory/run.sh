#!/usr/bin/env bash
# 09 memory: remember, recall and commit across runs and across restarts.
source "$(dirname "$0")/../lib.sh"
start_dev

step "run 1: tell the agent something; the step's conversation is committed to memory"
out=$(rathctl run --agent "$(spec examples/09_memory/memo.yaml)" --message "My favorite color is teal." --watch)
echo "$out"
first=$(echo "$out" | field "output version")

step "remember an item by hand, recorded as written by that version"
rathctl memory remember memory://user/preferences/seat "The user prefers a window seat." --version "$first"
rathctl memory list

step "restart the dev stack over the same state directory"
stop_dev
start_dev

step "recall from the command line"
rathctl memory recall "favorite color" -k 2

step "run 2, a new session: the worker recalls before the model is asked"
out=$(rathctl run --agent "$(spec examples/09_memory/recall.yaml)" --message "What is my favorite color, and which seat do I like?" --watch)
echo "$out"
second=$(echo "$out" | field "output version")
rathctl session show "$second" | grep -E 'memory_recall|assistant'

step "commit run 2 by hand as well (what commit: true did after the step)"
rathctl memory commit "$second"
rathctl memory list
