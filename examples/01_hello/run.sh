#!/usr/bin/env bash
# 01 hello: one agent, one message, the answer streamed as it is produced.
source "$(dirname "$0")/../lib.sh"
start_dev

step "run the hello agent and watch it stream"
rathctl run --agent "$(spec examples/01_hello/hello.yaml)" --message "Say hello" --watch
