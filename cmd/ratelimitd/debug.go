package main

import (
	"io"
	"net/http"
	"net/http/pprof"

	"github.com/ratelimitd/ratelimitd/pkg/service"
)

// debugMux serves Prometheus metrics and what envoyproxy's debug port does
// that we support: the loaded config and Go's profiler. It must not be
// exposed beyond the pod or host (DEBUG_HOST=127.0.0.1).
func debugMux(cfg service.ConfigSource, metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/rlconfig", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		c := cfg.Current()
		if c == nil {
			http.Error(w, "no rate limit configuration loaded", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, c.Dump())
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
