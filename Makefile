# dataenv: `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO          ?= go
BIN         := $(CURDIR)/bin
TEST_FLAGS  ?= -count=1 -timeout 45m -p 2
PKGS        ?= ./...
# The PostgreSQL matrix: `make test` runs the whole suite on the machine's version, then on each
# PG_MATRIX version (from the Debian roots `make deps` prepares under .deps/pg) the packages of
# MATRIX_PKGS whole and the tests of MATRIX_FOCUS_PKGS that MATRIX_FOCUS_RUN selects.
PG_MATRIX         ?= 17 18
MATRIX_PKGS       ?= ./tests/pipeline/... ./sidecar/internal/cluster/...
MATRIX_FOCUS_PKGS ?= ./tests/forks/... ./tests/lakes/...
MATRIX_FOCUS_RUN  ?= ^(TestForkModes|TestFullCopyOfBusyParent|TestForkFidelity|TestForkOfADjangoProject|TestForkOfAParentWithUntrustedExtensions|TestForkRoleOwnsCopiesAndIsDropped|TestSecondCopyOnAClusterTakesItsSpareToo|TestForkDeferThenMaterialize|TestRootRunAndMaterialize)$$
# deps.sh prepares roots for these versions; the tests that cover every version read it too.
export DATAENV_PG_ROOT_VERSIONS := $(PG_MATRIX)

.PHONY: help deps build test test-matrix bench chaos lint run clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## install what is missing: PostgreSQL, bubblewrap, prometheus, versitygw, DuckDB extensions, PostgreSQL 17/18 roots
	@bash tests/setup/deps.sh

build: ## build bin/dataenv (CGO_ENABLED=0) and bin/dataenv-runner (cgo, DuckDB)
	@mkdir -p $(BIN)
	@if [[ -d sidecar/cmd/dataenv ]]; then \
		CGO_ENABLED=0 $(GO) build -o $(BIN)/dataenv ./sidecar/cmd/dataenv; \
	else echo "build: sidecar/cmd/dataenv does not exist yet, skipping bin/dataenv"; fi
	@if [[ -d runner/cmd/dataenv-runner ]]; then \
		CGO_ENABLED=1 $(GO) build -o $(BIN)/dataenv-runner ./runner/cmd/dataenv-runner; \
	else echo "build: runner/cmd/dataenv-runner does not exist yet, skipping bin/dataenv-runner"; fi

test: deps ## install deps, run every test against real Postgres, S3 and DuckLake, then the matrix (PKGS=./x/... to narrow, without the matrix)
	$(GO) test $(TEST_FLAGS) $(PKGS)
	@if [[ "$(PKGS)" == "./..." ]]; then $(MAKE) --no-print-directory test-matrix; fi

test-matrix: deps ## run the focused suite on each PG_MATRIX version (PostgreSQL 17 and 18)
	@for v in $(PG_MATRIX); do \
		echo "== PostgreSQL $$v: $(MATRIX_PKGS), and $(MATRIX_FOCUS_RUN) in $(MATRIX_FOCUS_PKGS)"; \
		DATAENV_TEST_PG_VERSION=$$v $(GO) test $(TEST_FLAGS) $(MATRIX_PKGS); \
		DATAENV_TEST_PG_VERSION=$$v $(GO) test $(TEST_FLAGS) -run '$(MATRIX_FOCUS_RUN)' $(MATRIX_FOCUS_PKGS); \
	done

bench: deps ## run the benchmarks (tests/bench) and update BENCHMARKS.md; BENCH_FLAGS='-only pipeline' for some
	$(GO) run ./tests/bench $(BENCH_FLAGS)

chaos: deps ## run the chaos harness (tests/chaos: 1,000 leader kills and every other fault) and update RELIABILITY.md; CHAOS_FLAGS='-kills 100' for a short run
	$(GO) run ./tests/chaos $(CHAOS_FLAGS)

lint: ## gofmt, go vet, go mod tidy, and no test code in the shipped binaries
	@out="$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go'))"; \
	if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags dataenv_testhooks ./sidecar/... ./runner/...
	@$(GO) mod tidy -diff || { echo "go mod tidy would change go.mod/go.sum (above)"; exit 1; }
	@bad="$$($(GO) list -deps ./sidecar/cmd/dataenv ./runner/cmd/dataenv-runner | grep -E '^testing$$|/tests/|/testkinds$$' || true)"; \
	if [[ -n "$$bad" ]]; then echo "test code in the shipped binaries:"; echo "$$bad"; exit 1; fi

run: deps build ## start dataenv locally: a Postgres cluster under .dataenv/ (kept), the sidecar; prints a psql command
	$(BIN)/dataenv dev --dir $(CURDIR)/.dataenv

clean: ## remove build outputs (bin/); `make run`'s data in .dataenv/ stays
	rm -rf $(BIN)
