GO      ?= go
BIN     := bin/ratelimitd
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE   ?= ratelimitd:$(VERSION)
# docker, else podman; override with ENGINE=...
ENGINE  ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)

.PHONY: build run test test-vet test-bins test-packages test-modules test-race test-soak bench bench-go bench-load fmt lint image

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/ratelimitd

# The embedded store, so nothing else needs to run.
run:
	BACKEND_TYPE=memory USE_STATSD=false LOG_LEVEL=info $(GO) run ./cmd/ratelimitd --config api/examples

# Modules of their own for tests that check files against schemas and API
# types (Kubernetes, Istio, JSON Schema) and dashboards and alerts against
# Prometheus's PromQL parser, which the service does not import, so that
# ratelimitd's go.mod does not require them; each replaces ratelimitd with
# this tree.
TEST_MODULES := api/schema deploy/examples deploy/monitoring
# The binaries the tests run (test/integration, test/image,
# deploy/monitoring), built once before the tests: ratelimitd, the load
# drivers and the grpcurl go.mod's tool directive pins.
TEST_BIN_DIR := $(CURDIR)/bin/test
TEST_BIN     := $(TEST_BIN_DIR)/ratelimitd
TEST_TOOLS   := ./cmd/rlload ./internal/queueload/cmd/queueload github.com/fullstorydev/grpcurl/cmd/grpcurl
TEST_RUN_ENV := CGO_ENABLED=0 RATELIMITD_BIN=$(TEST_BIN) RATELIMITD_TOOLS=$(TEST_BIN_DIR)

# One build configuration, CGO_ENABLED=0 (the image's): go vet, the
# binaries above, every test and the test modules share it, so every
# package compiles once; a fresh clone's make test is mostly that compile
# (CONTRIBUTING.md has the figures). go test's own vet pass would repeat a
# subset of go vet's. The packages whose tests run longest, mostly waiting
# on processes they start, come first, so that they run while the rest
# compiles (go test builds and runs packages in the order given; -p 4
# keeps two workers compiling while they run); the integration tests run
# two at a time (-parallel 2, on any machine). The test modules run beside
# the module's tests at the lowest priority, so that they take only the
# CPU those leave idle (downloads, the last tests' waits) and compile
# nothing twice (they start once go vet has compiled what they share).
SLOW_UNITS := ./pkg/store/redisstore ./internal/scripts
SLOW_TESTS := ./test/integration $(SLOW_UNITS)
# The go command, the compiler, the linker and vet allocate much and live
# briefly: at GOGC=400 they spend less CPU (vet a fifth less). Test
# binaries, and the processes they start, get the default back (-exec), so
# that the tests see the runtime that production does. A GOGC the caller
# sets is left alone throughout.
ifeq ($(origin GOGC),undefined)
TOOL_ENV  := GOGC=400
TEST_EXEC := -exec 'env -u GOGC'
endif
# Nothing make test builds goes to a debugger, so it is built without
# DWARF: a compile and link of every test package costs a fifth less CPU,
# vet's compile of the dependencies a tenth (stack traces and pprof read
# the symbol and line tables, which stay). Exported through GOFLAGS so that
# what the tests build themselves (grpcurl, the load drivers) shares the
# compiled packages; a GOFLAGS the caller sets is left alone.
ifeq ($(origin GOFLAGS),undefined)
TOOL_ENV += GOFLAGS='-gcflags=all=-dwarf=false -ldflags=-w'
endif

test:
	@$(MAKE) --no-print-directory -j2 test-packages test-modules

test-vet:
	$(TOOL_ENV) CGO_ENABLED=0 $(GO) vet ./...

test-bins: test-vet
	$(TOOL_ENV) CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(TEST_BIN) ./cmd/ratelimitd
	$(TOOL_ENV) CGO_ENABLED=0 $(GO) build -o $(TEST_BIN_DIR)/ $(TEST_TOOLS)

test-packages: test-bins
	$(TOOL_ENV) $(TEST_RUN_ENV) $(GO) test $(TEST_EXEC) -vet=off -count=1 -p 4 -parallel 2 $(SLOW_TESTS) ./...

test-modules: test-bins
	@set -e; for m in $(TEST_MODULES); do \
		echo "== $$m (own go.mod)"; \
		$(TOOL_ENV) CGO_ENABLED=0 nice -n 19 $(GO) -C $$m vet ./...; \
		$(TOOL_ENV) $(TEST_RUN_ENV) nice -n 19 $(GO) -C $$m test $(TEST_EXEC) -vet=off -count=1 ./...; \
	done

# make test-race runs the packages with code of their own again under the
# race detector (a second compile, with cgo; test/ holds black-box tests of
# processes, whose instrumented side would be the test client only);
# .ci/run runs both.
RACE_PKGS := ./cmd/... ./internal/... ./pkg/...
test-race:
	$(TOOL_ENV) $(GO) test $(TEST_EXEC) -race -vet=off -count=1 -p 4 $(SLOW_UNITS) $(RACE_PKGS)

# The integration tests N times in a row (default 10), so that a flaky test
# shows up as a failure instead of a rare red CI run; -failfast stops at the
# first failure, printed with that run's logs. SOAK_FLAGS=-race adds the
# race detector (slower). CI runs it with SOAK=N (.ci/run). RATELIMITD_SOAK
# also runs the tests too slow for make test (TestMemstoreWindowBoundary).
N ?= 10
SOAK_FLAGS ?=
test-soak:
	RATELIMITD_SOAK=1 $(GO) test -count=$(N) -failfast -timeout=$$(( $(N) * 10 + 10 ))m $(SOAK_FLAGS) ./test/integration/...

# Cost per decision in one interleaved run (cmd/rlbench, about 1.5 minutes):
# the embedded store, a local redis-server, a bare gRPC floor and a model of
# envoyproxy/ratelimit's Redis backend (pipelined INCRBY + EXPIRE), 1 and 3
# descriptors, 50 concurrent calls over loopback. Settings such as
# REDIS_PIPELINE_WINDOW in the environment reach the service under test.
# Other scenarios (docs/performance.md): BENCH_FLAGS='-scenario zipf' (Zipf
# over 10^5 counters from three replicas, leases off and on), '-scenario
# hot' (one hot counter), '-scenario all'; zipf about 15 minutes, hot about 8;
# '-rate N' offers every target N decisions/s, to compare CPU at one load.
bench:
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	$(GO) build -o "$$dir/ratelimitd" ./cmd/ratelimitd && \
	$(GO) build -o "$$dir/rlbench" ./cmd/rlbench && \
	"$$dir/rlbench" -ratelimitd "$$dir/ratelimitd" -config bench/config $(BENCH_FLAGS)

# Go benchmarks: every algorithm on every store, the matcher, the service.
bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# A bounded load run per algorithm against the real binary on loopback.
bench-load:
	bash bench/load.sh

fmt:
	gofmt -w .

lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@set -e; for m in $(TEST_MODULES); do $(GO) -C $$m vet ./...; done

# The container image (Dockerfile): static binary, distroless, uid 65534.
image:
	@if [ -z "$(ENGINE)" ]; then \
		echo "make image: neither docker nor podman is installed (set ENGINE=/path/to/engine)."; \
		echo "Without an engine: CGO_ENABLED=0 go build -ldflags '-X main.version=$(VERSION)' ./cmd/ratelimitd gives the same static binary."; \
		exit 1; \
	fi
	@$(ENGINE) info >/dev/null 2>&1 || { echo "make image: $(ENGINE) is installed but its engine is not reachable ($(ENGINE) info fails); start it and retry."; exit 1; }
	$(ENGINE) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .
	@echo "built $(IMAGE); run: $(ENGINE) run --rm -p 8081:8081 -p 8080:8080 -e BACKEND_TYPE=memory $(IMAGE)"

# Regenerates api/queue/v1's and api/admin/v1's Go code. Needs protoc (Debian protobuf-compiler)
# and the plugins pinned to go.mod's versions:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
.PHONY: proto
proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc --proto_path=api \
		--go_out=api --go_opt=paths=source_relative \
		--go-grpc_out=api --go-grpc_opt=paths=source_relative \
		queue/v1/queue.proto admin/v1/counters.proto
