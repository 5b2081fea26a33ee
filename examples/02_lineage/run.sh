#!/usr/bin/env bash
# 02 session lineage: create, append, fork, merge, detach; graph and blame.
source "$(dirname "$0")/../lib.sh"
start_dev
id() { awk '{print $1; exit}'; } # a session command's first word is the new version's id

step "a session, and an answer appended to it"
rathctl session new --system "You plan trips." --user "Plan a trip to Kyoto" | tee "$EXAMPLE_TMP/out"
root=$(id <"$EXAMPLE_TMP/out")
rathctl session append "$root" --assistant "Day 1: Fushimi Inari." | tee "$EXAMPLE_TMP/out"
day1=$(id <"$EXAMPLE_TMP/out")

step "fork it (one small row; the history is shared, not copied) and extend both branches"
rathctl session fork "$day1" | tee "$EXAMPLE_TMP/out"
fork=$(id <"$EXAMPLE_TMP/out")
rathctl session append "$day1" --user "Add a temple." | tee "$EXAMPLE_TMP/out"
temple=$(id <"$EXAMPLE_TMP/out")
rathctl session append "$fork" --user "Add a market." | tee "$EXAMPLE_TMP/out"
market=$(id <"$EXAMPLE_TMP/out")

step "merge the branches: the shared history appears once, then what each added"
rathctl session merge "$temple" "$market" | tee "$EXAMPLE_TMP/out"
merged=$(id <"$EXAMPLE_TMP/out")
rathctl session show "$merged"

step "the graph from the root (mermaid; --format svg or dot for pictures)"
rathctl graph "$root" --format mermaid | grep -v classDef

step "blame: which version wrote each chunk of the merge"
rathctl blame "$merged"

step "detach: the same transcript as a new root with no ancestors"
rathctl session detach "$merged" | tee "$EXAMPLE_TMP/out"
detached=$(id <"$EXAMPLE_TMP/out")
echo "ancestors of the detached version: $(rathctl session log "$detached" | wc -l)"
echo "ancestors of the merge: $(rathctl session log "$merged" | wc -l)"
