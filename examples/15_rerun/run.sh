#!/usr/bin/env bash
# 15 fork-and-rerun: re-execute a recorded path from an ancestor with another model.
source "$(dirname "$0")/../lib.sh"
start_dev

step "record a path: a draft, a user's request, a revision"
out=$(rathctl run --agent "$(spec examples/15_rerun/poet.yaml)" --message "A poem about Kyoto" --watch)
echo "$out"
run1=$(echo "$out" | field "run")
draft=$(echo "$out" | field "output version")
input=$(rathctl runs show "$run1" | field "input")
ask=$(rathctl session append "$draft" --user "Shorter, please." | awk '{print $1; exit}')
out=$(rathctl run --agent "$(spec examples/15_rerun/poet.yaml)" --session "$ask" --watch)
echo "$out"
final=$(echo "$out" | field "output version")

step "rerun the path from its first version with another model"
# Offline the other model is the scripted model with other replies; against
# a real endpoint set RERUN_MODEL, e.g. RERUN_MODEL=gpt-4o.
rathctl rerun "$final" --from "$input" --model "${RERUN_MODEL:-scripted:examples/15_rerun/other-model.yaml}" \
	| tee "$EXAMPLE_TMP/rerun"
head=$(sed -n 's/.*new head \([^ ]*\).*/\1/p' "$EXAMPLE_TMP/rerun")

step "the new branch"
rathctl session show "$head"

step "the original, unchanged"
rathctl session show "$final"

step "both branches in one graph"
rathctl graph "$input" --format mermaid | grep -v classDef

step "a workflow run the coordinator drives: the poet drafts, then tightens its draft"
out=$(rathctl run "$(spec examples/15_rerun/poem.yaml)" --message "A poem about Kyoto" --watch)
echo "$out"
run=$(echo "$out" | field "run")
rathctl runs show "$run"

step "rerun the run from its second step (key 2) with another model: step 1 is kept, step 2 runs anew"
rathctl rerun --run "$run" --from 2 --model "${RERUN_MODEL:-scripted:examples/15_rerun/other-model.yaml}" \
	| tee "$EXAMPLE_TMP/rerun-run"
rerun=$(sed -n 's/.*: new run \([^ ]*\) .*/\1/p' "$EXAMPLE_TMP/rerun-run")
out=$(rathctl runs watch "$rerun")
echo "$out"
rathctl session show "$(echo "$out" | field "output version")"
kept_old=$(rathctl runs show "$run" | awk '$1 ~ /\/1$/ {print $5}')
kept_new=$(rathctl runs show "$rerun" | awk '$1 ~ /\/1$/ {print $5}')
if [ -n "$kept_old" ] && [ "$kept_old" = "$kept_new" ]; then
	echo "step 1 kept: both runs' step 1 output is $kept_old"
else
	echo "step 1 was not kept: $kept_old, then $kept_new"
fi
