GO      ?= go
BIN     := bin/ratelimitd

.PHONY: build run test bench fmt lint

build:
	$(GO) build -o $(BIN) ./cmd/ratelimitd

# The embedded store, so nothing else needs to run.
run:
	BACKEND_TYPE=memory LOG_LEVEL=info $(GO) run ./cmd/ratelimitd --config api/examples

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

# Go benchmarks (every algorithm on every store), then a bounded load run
# against the real binary on loopback (bench/load.sh).
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	bash bench/load.sh

fmt:
	gofmt -w .

lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
