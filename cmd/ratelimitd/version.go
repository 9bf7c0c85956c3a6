package main

// version is stamped at build time:
// go build -ldflags "-X main.version=v1.2.3" ./cmd/ratelimitd
var version = "dev"
