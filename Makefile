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

# Regenerates api/queue/v1's Go code. Needs protoc (Debian protobuf-compiler)
# and the plugins pinned to go.mod's versions:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
.PHONY: proto
proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc --proto_path=api \
		--go_out=api --go_opt=paths=source_relative \
		--go-grpc_out=api --go-grpc_opt=paths=source_relative \
		queue/v1/queue.proto
