#!/usr/bin/env bash
# 11 dynamic selector: a model picks which agent acts next, until it says done.
source "$(dirname "$0")/../lib.sh"
start_dev

step "route a support ticket"
out=$(rathctl run "$(spec examples/workflows/triage.yaml)" --message "I was charged twice." --watch)
echo "$out"
version=$(echo "$out" | field "output version")

step "the transcript: each routing decision is a selector_decision chunk"
rathctl session show "$version"
