#!/usr/bin/env bash
# 10 provider variation: one workflow, two providers, chosen by the config file.
source "$(dirname "$0")/../lib.sh"

# The environment outranks the config file (docs/models.md), so keep the
# environment's providers out of this example's dev stack.
unset OPENAI_API_KEY OPENAI_BASE_URL OPENAI_DEFAULT_MODEL AZURE_OPENAI_API_KEY AZURE_API_KEY ANTHROPIC_API_KEY
export RATH_HOME="$EXAMPLE_TMP/home"

if [ -z "${SMALL_BASE_URL:-}" ]; then
	step "start two fake OpenAI-compatible endpoints (one offline server: URL/small/v1 and URL/large/v1)"
	go build -o "$EXAMPLE_TMP/bin/fakeopenai" ./examples/10_providers/fakeopenai
	"$EXAMPLE_TMP/bin/fakeopenai" >"$EXAMPLE_TMP/fake.url" 2>"$EXAMPLE_TMP/fake.log" &
	fake_pid=$!
	trap 'kill $fake_pid 2>/dev/null || true; cleanup' EXIT
	for _ in $(seq 1 100); do [ -s "$EXAMPLE_TMP/fake.url" ] && break; sleep 0.1; done
	fake=$(head -n1 "$EXAMPLE_TMP/fake.url")
	SMALL_BASE_URL=$fake/small/v1
	LARGE_BASE_URL=$fake/large/v1
	echo "fake endpoints at $SMALL_BASE_URL and $LARGE_BASE_URL"
fi

step "two providers in \$RATH_HOME/config.yaml"
key=()
if [ -n "${PROVIDER_API_KEY_ENV:-}" ]; then key=(--api-key-env "$PROVIDER_API_KEY_ENV"); fi
rathctl config set-provider small --base-url "$SMALL_BASE_URL" "${key[@]}" --default
rathctl config set-provider large --base-url "$LARGE_BASE_URL" "${key[@]}"
rathctl config show
start_dev

for provider in small large; do
	step "the review workflow on the $provider provider"
	rathctl config use "$provider"
	rathctl run examples/10_providers/review.yaml --message "Name a good month to visit Kyoto." --watch
done
