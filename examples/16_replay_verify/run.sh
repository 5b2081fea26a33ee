#!/usr/bin/env bash
# 16 replay without the model, and verify the hash chain.
source "$(dirname "$0")/../lib.sh"
start_dev

step "a recorded run: the scribe agent writes, reads and checks a file"
out=$(rathctl run --agent "$(spec examples/agents/scribe.yaml)" --message "Plan a trip to Kyoto" --watch)
echo "$out"
version=$(echo "$out" | field "output version")

step "replay it strictly: the recorded replies and tool results, no model, no tool"
rathctl replay "$version" --strict

step "verify the version's hash chain (every ancestor and chunk recomputed)"
rathctl verify "$version"

step "verify everything this tenant has"
rathctl verify --all
