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
demo: ## run the main job on the embedded default (builds bin/rathctl first)
	@echo "make demo: building bin/rathctl; the first build on a cold machine compiles every dependency (a minute or more), each package is listed as it compiles"
	@set -o pipefail; start=$$(date +%s); n=0; \
	$(GO) build -v -o $(BIN)/rathctl ./cmd/rathctl 2>&1 | while IFS= read -r line; do \
		n=$$((n+1)); printf '  [%d] %s\n' "$$n" "$$line"; \
	done; \
	echo "make demo: bin/rathctl built in $$(( $$(date +%s) - start ))s; running 'bin/rathctl demo'"
	@$(BIN)/rathctl demo

.PHONY: test
test: ## run every test with -race (starts a private Postgres; installs it if missing)
	scripts/test.sh

.PHONY: examples
examples: ## run every examples/NN_* offline exactly as its README says, and check its output (Docker for 03)
	scripts/sandbox-image.sh
	$(GO) test -count=1 -timeout 30m -run '^TestExamples$$' -v ./examples/

.PHONY: test-short
test-short: ## run the tests that need no Postgres or Docker
	$(GO) test -short -count=1 ./...

.PHONY: bench
bench: ## run the Go benchmarks (starts a private Postgres)
	eval "$$(scripts/testpg.sh start)"; trap 'scripts/testpg.sh stop' EXIT; \
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

.PHONY: bench-load
bench-load: ## rathctl bench: every scenario against its limits on a private Postgres (docs/BENCHMARKS.md's table)
	eval "$$(scripts/testpg.sh start)"; trap 'scripts/testpg.sh stop' EXIT; \
	db=rath_bench_$$$$; "$$RATH_TEST_PG_BIN/psql" "$$RATH_TEST_DATABASE_URL" -qc "CREATE DATABASE $$db" && \
	$(GO) run ./cmd/rathctl bench --store "$${RATH_TEST_DATABASE_URL%%/postgres\?*}/$$db?sslmode=disable" \
	  --scenario all --duration 10s --recall-items 1000,5000,20000 --json bench-report.json --svg bench-svg

.PHONY: bench-cluster
bench-cluster: ## rathctl bench's steps scenario on separate coordinator, worker, NATS and Postgres processes, CPU a step by process (WORKERS, SLOTS, RUNS, DURATION)
	scripts/bench-cluster.sh

.PHONY: fuzz
fuzz: ## run every fuzzer for FUZZTIME each (default 30s)
	scripts/fuzz.sh $${FUZZTIME:-30s}

.PHONY: faults
faults: ## the fault tests at full scale: 1,000 steps / 50 worker kills, 50 NATS and Postgres restarts, the partition (RATH_FAULT_SCALE, default 5)
	eval "$$(scripts/testpg.sh start)"; \
	RATH_FAULT_SCALE=$${RATH_FAULT_SCALE:-5} $(GO) test -tags faults -count=1 -timeout 60m -v \
	  -run 'Test(WorkerKillsAtScale|NATSRestartsUnderLoad|PostgresRestartsUnderLoad|PartitionedWorkerIsFenced)$$' ./e2e/

.PHONY: soak
soak: ## the soak test: SOAK_DURATION (default 30m) at half the measured maximum (or SOAK_RATE runs/s), a fault every SOAK_FAULT_EVERY (5m)
	eval "$$(scripts/testpg.sh start)"; \
	SOAK_DURATION=$${SOAK_DURATION:-30m} $(GO) test -tags soak -count=1 -timeout 0 -v -run '^TestSoak$$' ./e2e/

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
