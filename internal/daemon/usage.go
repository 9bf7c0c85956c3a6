package daemon

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
)

// errHelp is parseSettings' answer to -h/--help: Run prints the usage and
// exits 0.
var errHelp = errors.New("help requested")

// flagDoc is one flag of `ratelimitd`: the environment variable it
// overrides and that variable's built-in default (never the value in the
// environment, which may hold a password).
type flagDoc struct {
	name, arg, env, def, usage string
}

// serveFlags is every flag the service takes; readFlags defines them from
// this table and printUsage prints it, so the two cannot drift apart.
func serveFlags() []flagDoc {
	return []flagDoc{
		{"config", "DIR", "RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY", "/srv/runtime_data/current/config", "directory of rate limit YAML files, watched for changes"},
		{"grpc-addr", "HOST:PORT", "GRPC_HOST:GRPC_PORT", "0.0.0.0:8081", "gRPC listen address: RateLimitService, health, reflection"},
		{"http-addr", "HOST:PORT", "HOST:PORT", "0.0.0.0:8080", "HTTP listen address: /healthcheck, /json"},
		{"debug-addr", "HOST:PORT", "DEBUG_HOST:DEBUG_PORT", "0.0.0.0:6070", "debug listen address: /metrics, /rlconfig, pprof with DEBUG_PPROF"},
		{"backend", "NAME", "BACKEND_TYPE", "redis if REDIS_URL is set, else memory", "store: memory or redis"},
		{"redis-url", "URL", "REDIS_URL", "unset", "Redis address; prefer REDIS_AUTH_FILE for the password, a flag shows in ps"},
		{"ready-file", "FILE", "READY_FILE", "unset", "once listening, write the bound addresses here as JSON (for port 0)"},
	}
}

// printUsage writes what `ratelimitd --help` shows.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: ratelimitd [flags]
       ratelimitd check [--config DIR] [--merge_domain_configs]

Serves Envoy's rate limit service. Every setting is an environment variable
(envoyproxy/ratelimit's names; see README.md, Settings); a flag overrides it.

Flags:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range serveFlags() {
		fmt.Fprintf(tw, "  --%s %s\t%s\n", f.name, f.arg, f.usage)
		fmt.Fprintf(tw, "  \tenv %s, default %s\n", f.env, f.def)
	}
	fmt.Fprintf(tw, "  -h, --help\tthis help\n")
	_ = tw.Flush()
}
