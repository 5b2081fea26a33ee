#!/usr/bin/env bash
# 18 training data: a rollout over 20 tasks, scored by a verifier, exported
# as SFT records and DPO pairs whose provenance rathctl verify accepts.
source "$(dirname "$0")/../lib.sh"
start_dev

step "roll out 20 tasks: three solvers per task, each branch scored by the verifier in its sandbox"
runs=()
for i in $(seq -w 1 20); do
	out=$(rathctl run "$(spec examples/18_training_data/rollout.yaml)" \
		--message "Task $i: what is 6 x 7? Save the number in answer.txt." --watch)
	runs+=("$(echo "$out" | field "run")")
	echo "task $i: $(echo "$out" | grep -E '^run .* (succeeded|failed)')"
done

step "one task's run: per branch an agent step (b<i>.1) and a verify step (b<i>.2)"
rathctl runs show "${runs[0]}"

step "the scores the verifier recorded (the label chunk rathctl label --score writes, by \"verifier\")"
rathctl runs show "${runs[0]}" | awk '$1 ~ /\/1\.b[0-9]+\.2$/ {print $1, $5}' | sort | while read -r key v; do
	echo "${key##*/}: $(rathctl session show "$v" | tail -n1)"
done

step "export SFT records (OpenAI fine-tuning chat format) and DPO pairs from the verifier's scores"
rathctl export trajectories --quiet --out "$EXAMPLE_TMP/sft.jsonl"
rathctl export pairs --from scores --out "$EXAMPLE_TMP/pairs.jsonl"
echo "sft.jsonl: $(wc -l <"$EXAMPLE_TMP/sft.jsonl") records; pairs.jsonl: $(wc -l <"$EXAMPLE_TMP/pairs.jsonl") pairs"

step "decode both files strictly (pkg/trainset's reader for SFT; every pair's fields for DPO)"
go run ./examples/18_training_data/checksft "$EXAMPLE_TMP/sft.jsonl" "$EXAMPLE_TMP/pairs.jsonl" >"$EXAMPLE_TMP/versions.txt"

step "check the provenance: rathctl verify recomputes every exported version's hash chain"
sort -u "$EXAMPLE_TMP/versions.txt" >"$EXAMPLE_TMP/unique.txt"
ok=0
while read -r v; do
	rathctl verify "$v" >/dev/null
	ok=$((ok + 1))
done <"$EXAMPLE_TMP/unique.txt"
echo "verified $ok distinct versions named by the records and pairs"
