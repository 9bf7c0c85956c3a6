package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

type nilConfig struct{}

func (nilConfig) Current() *config.Config { return nil }

func TestDebugMux(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m 1\n") })
	tests := []struct {
		path      string
		pprof     bool
		want      int
		forbidden string // must not appear in the body
	}{
		{path: "/metrics", want: http.StatusOK},
		{path: "/debug/pprof/", want: http.StatusNotFound},
		{path: "/debug/pprof/profile?seconds=1", want: http.StatusNotFound},
		{path: "/debug/pprof/trace", want: http.StatusNotFound},
		{path: "/debug/pprof/goroutine?debug=1", want: http.StatusNotFound},
		{path: "/debug/pprof/cmdline", want: http.StatusNotFound},
		{path: "/debug/pprof/", pprof: true, want: http.StatusOK},
		{path: "/debug/pprof/goroutine?debug=1", pprof: true, want: http.StatusOK},
		// Never: the command line may carry --redis-url with a password.
		{path: "/debug/pprof/cmdline", pprof: true, want: http.StatusNotFound, forbidden: "-test."},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		debugMux(nilConfig{}, metrics, tt.pprof).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if rec.Code != tt.want {
			t.Errorf("DEBUG_PPROF=%v GET %s = %d, want %d", tt.pprof, tt.path, rec.Code, tt.want)
		}
		if tt.forbidden != "" && strings.Contains(rec.Body.String(), tt.forbidden) {
			t.Errorf("DEBUG_PPROF=%v GET %s shows %q", tt.pprof, tt.path, tt.forbidden)
		}
	}
}
