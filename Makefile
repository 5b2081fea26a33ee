# Rath — make help lists the targets.
SHELL := /bin/bash
GO    ?= go
BIN   := bin

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build coordinator, worker and rathctl into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: demo
demo: ## run the main job on the embedded default
	$(GO) run ./cmd/rathctl demo

.PHONY: test
test: ## run every test with -race (starts a private Postgres; installs it if missing)
	scripts/test.sh

.PHONY: test-short
test-short: ## run the tests that need no Postgres or Docker
	$(GO) test -short -count=1 ./...

.PHONY: bench
bench: ## run the Go benchmarks (starts a private Postgres)
	eval "$$(scripts/testpg.sh start)"; trap 'scripts/testpg.sh stop' EXIT; \
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

.PHONY: fuzz
fuzz: ## run every fuzzer for FUZZTIME each (default 30s)
	scripts/fuzz.sh $${FUZZTIME:-30s}

.PHONY: lint
lint: ## golangci-lint (installed through go.mod's tool directive) and go vet
	$(GO) vet ./...
	$(GO) tool golangci-lint run ./...

.PHONY: fmt
fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

.PHONY: clean
clean: ## remove build output and local state
	rm -rf $(BIN) .rath
