#!/usr/bin/env bash
# 16 replay a whole run without the model, and verify the hash chain.
source "$(dirname "$0")/../lib.sh"
start_dev

step "a recorded run: a workflow whose scribe writes a plan with the built-in tools and whose checker checks it"
out=$(rathctl run "$(spec examples/16_replay_verify/trip.yaml)" --message "Plan a trip to Kyoto" --watch)
echo "$out"
run=$(echo "$out" | field "run")
version=$(echo "$out" | field "output version")

step "replay the whole run strictly: every step from its recorded replies and tool results, no model, no tool"
rathctl replay --run "$run" --strict | tee "$EXAMPLE_TMP/replay"
replayed=$(sed -n 's/.*, replay \([^ ,]*\),.*/\1/p' "$EXAMPLE_TMP/replay")

step "verify the run's output and the replay's: every ancestor and chunk recomputed"
rathctl verify "$version"
rathctl verify "$replayed"

step "verify everything this tenant has"
rathctl verify --all
