package daemon

import (
	"io"
	"net/http"
	"net/http/pprof"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// debugMux serves Prometheus metrics and the loaded config, and Go's
// profiler only when DEBUG_PPROF turns it on. Nothing here shows a secret:
// the config holds none, and pprof's cmdline endpoint, which would print
// --redis-url with its password, is never served. Profiles still reveal
// memory contents and cost CPU, hence off by default.
func debugMux(cfg interface{ Current() *config.Config }, metrics http.Handler, withPprof bool) *http.ServeMux {
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
	if !withPprof {
		return mux
	}
	// pprof.Index would link (and its named profiles serve) only what is
	// registered here or in runtime/pprof; cmdline is neither.
	mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/pprof/cmdline" {
			http.NotFound(w, r)
			return
		}
		pprof.Index(w, r)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// debugEndpoints is what the debug port serves, for the startup line.
func debugEndpoints(withPprof, withAdmin bool) string {
	list := "/metrics, /rlconfig"
	if withPprof {
		list += ", /debug/pprof/"
	}
	if withAdmin {
		list += ", /admin/counters/"
	}
	return " (" + list + ")"
}
