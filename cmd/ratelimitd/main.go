// Command ratelimitd is a drop-in replacement for envoyproxy/ratelimit: it
// serves Envoy's RateLimitService over gRPC, reads the same YAML config and
// environment settings, and decides each request atomically. The daemon
// itself is internal/daemon; main is its process: arguments, environment,
// exit code.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ratelimitd/ratelimitd/internal/daemon"
)

// version is stamped at build time:
// go build -ldflags "-X main.version=v1.2.3" ./cmd/ratelimitd
var version = "dev"

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println("ratelimitd", version)
		return
	}
	if err := daemon.Run(context.Background(), version, os.Args[1:], os.LookupEnv, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "ratelimitd: %v\n", err)
		os.Exit(1)
	}
}
