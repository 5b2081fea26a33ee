#!/usr/bin/env bash
# 17 evidence dossier: one document with everything a run did.
source "$(dirname "$0")/../lib.sh"
start_dev

step "a run with tools, workspace changes and usage: the scribe agent"
out=$(rathctl run --agent "$(spec examples/agents/scribe.yaml)" --message "Plan a trip to Kyoto" --watch)
echo "$out"
run=$(echo "$out" | field "run")

step "its dossier (markdown), priced at 0.15/0.60 USD per million tokens"
model=${RATH_MODEL:-scripted}
rathctl dossier "$run" --price "$model=0.15/0.60" >"$EXAMPLE_TMP/dossier.md"
grep -E '^#' "$EXAMPLE_TMP/dossier.md"

step "the usage and cost table, and the anchor"
sed -n '/^## Usage and cost/,/^## Final output/p' "$EXAMPLE_TMP/dossier.md"
sed -n '/^## Anchor/,$p' "$EXAMPLE_TMP/dossier.md"

step "the same as a self-contained HTML page"
rathctl dossier "$run" --format html --out "$EXAMPLE_TMP/dossier.html"
echo "dossier.html: $(wc -c <"$EXAMPLE_TMP/dossier.html") bytes, $(grep -c '<svg' "$EXAMPLE_TMP/dossier.html") graph(s)"
