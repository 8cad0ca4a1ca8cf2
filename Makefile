# Pier's tasks. `make help` lists them.
SHELL := /bin/bash
GO ?= go
BIN := bin/pier
SERVER_BIN := bin/pier-server
# Node 22 from tools/ (installed by `make tools`) comes first on the PATH, so
# the linter, the MCP clients, the JavaScript twins and playwright run on it
# whatever node the machine has.
export PATH := $(CURDIR)/tools/node_modules/.bin:$(PATH)
# Patched copies of dependencies (third_party/, through go.mod's replace):
# ./... does not reach them, so the tests name them.
THIRD_PARTY := github.com/santhosh-tekuri/jsonschema/v6 github.com/gowebpki/jcs github.com/mattn/go-runewidth

.PHONY: help build install run generate check-generate test test-short test-scale cover lint bench bench-wrk tools clean conformance fuzz

help: ## List the tasks
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# pier, the client, is linked statically (CLIENT_ENV): with cgo, which Go
# turns on whenever a C compiler is installed, every binary that links net
# (pflag does) is linked against libc and pays the dynamic loader on each
# start, 1.2 to 1.5 ms of CPU on the loaded 2-core machine, half of what a
# whole static start takes there (bench/README.md, "CLI start"); without cgo,
# Go's own DNS resolver and /etc/passwd reader stand in for libc's.
# pier-server, which starts once, is built as before.
CLIENT_ENV := CGO_ENABLED=0

build: ## Build bin/pier (the CLI, static) and bin/pier-server (the CLI with the server's commands)
	$(CLIENT_ENV) $(GO) build -o $(BIN) ./cmd/pier
	$(GO) build -o $(SERVER_BIN) ./cmd/pier-server

install: ## Install pier (static) and pier-server into $(go env GOBIN) (or ~/go/bin)
	$(CLIENT_ENV) $(GO) install ./cmd/pier
	$(GO) install ./cmd/pier-server

run: build ## Run the server with the embedded defaults
	./$(SERVER_BIN) server

generate: ## Regenerate everything derived from openapi/openapi.yaml
	$(GO) generate ./models ./openapi ./sdk/rawapi ./server/api
	$(GO) run ./internal/tools/optable

check-generate: generate ## Fail when generated files drift from the contract
	@git diff --exit-code -- . || (echo "generated files are out of date: run make generate and commit"; exit 1)
	@test -z "$$(git status --porcelain --untracked-files=all -- openapi models sdk server cli internal docs README.md)" || (git status --porcelain -- openapi models sdk server cli internal docs README.md; echo "untracked generated files"; exit 1)

tools: ## Install the Node tools (Node 22, OpenAPI linter, MCP client, playwright-core) from tools/package-lock.json
	@if [ ! -f tools/node_modules/.package-lock.json ] || [ tools/package-lock.json -nt tools/node_modules/.package-lock.json ]; then npm ci --prefix tools --no-audit --no-fund; fi

lint: tools ## Vet, staticcheck and gofmt-check the Go code, check go.mod is tidy and the import rules, and lint the contract
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@$(GO) mod tidy -diff || (echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1)
	$(GO) test -count=1 ./internal/tools/importrules
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1)
	tools/node_modules/.bin/redocly lint openapi/openapi.yaml --config redocly.yaml --format=stylish

test: tools ## Run every test (PostgreSQL, Node and browser tests fail if their tools are missing under CI)
	$(GO) test -count=1 -timeout 20m ./... $(THIRD_PARTY)

# cover's floors, in percent of statements covered by the package's own
# tests (both engines for the store; the service's tests drive the domain
# directly over SQLite with fakes of the ports that leave the process).
COVER_PKGS ?= ./server/internal/service ./server/internal/store
STORE_COVER_MIN ?= 80
SERVICE_COVER_MIN ?= 80

cover: ## Print the service and store packages' coverage; fail below STORE_COVER_MIN (and SERVICE_COVER_MIN)
	@out=$$($(GO) test -count=1 -timeout 20m -cover $(COVER_PKGS) 2>&1); status=$$?; echo "$$out"; \
	if [ $$status -ne 0 ]; then exit $$status; fi; \
	echo "$$out" | awk -v store=$(STORE_COVER_MIN) -v service=$(SERVICE_COVER_MIN) ' \
		/coverage:/ { pct = ""; for (i = 1; i < NF; i++) if ($$i == "coverage:") pct = $$(i + 1); sub("%", "", pct); \
			min = 0; if ($$2 ~ /\/internal\/store$$/) { min = store; seen_store = 1 } if ($$2 ~ /\/internal\/service$$/) { min = service; seen_service = 1 } \
			verdict = (pct + 0 < min + 0) ? "UNDER THE FLOOR" : "ok"; if (verdict != "ok") bad = 1; \
			printf "coverage %-45s %6s%%  floor %s%%  %s\n", $$2, pct, min, verdict } \
		END { if (store > 0 && !seen_store) { print "no coverage reported for the store"; bad = 1 } \
			if (service > 0 && !seen_service) { print "no coverage reported for the service"; bad = 1 } exit bad }'

test-scale: ## Run the scale-out acceptance tests alone: PostgreSQL, three server processes and nginx (both required), then the same on hosts of their own (network namespaces: root, runc, nft)
	PIER_TEST_POSTGRES=require PIER_TEST_NGINX=require $(GO) test -count=1 -timeout 8m -run '^(TestScaleOutAsAnOperatorRunsIt|TestReplicasOnSeparateHosts)$$' -v ./server

test-short: ## Run the tests without PostgreSQL
	PIER_TEST_POSTGRES=skip $(GO) test -count=1 ./... $(THIRD_PARTY)

bench: ## Run the Go benchmarks (API, MCP, edge handler, launch latency, process launch) and the wrk comparisons (see bench/README.md)
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./bench/...
	bash bench/wrk.sh
	bash bench/edge.sh
	bash bench/verify.sh
	bash bench/services.sh

fuzz: ## Run every Go fuzz target for FUZZTIME each (default 10s), seed corpora in testdata/fuzz first
	bash scripts/fuzz.sh

conformance: build ## Run the public conformance suites against a local server and verify the signed reports (conformance-reports/)
	bash scripts/conformance.sh

clean: ## Remove build output
	rm -rf bin
