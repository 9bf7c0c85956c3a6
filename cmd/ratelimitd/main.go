// Command ratelimitd is a drop-in replacement for envoyproxy/ratelimit: it
// serves Envoy's RateLimitService over gRPC, reads the same YAML config and
// environment settings, and decides each request atomically.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println("ratelimitd", version)
		return
	}
	if err := run(context.Background(), os.Args[1:], os.LookupEnv, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "ratelimitd: %v\n", err)
		os.Exit(1)
	}
}
