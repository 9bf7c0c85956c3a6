package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/middleware"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

const benchRules = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 4000000000}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 4000000000}
`

// cpuTime is the process's user and system CPU so far: client and server
// share the process, so it is the CPU of the whole call, both ends.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs op in b.Loop and reports the process's CPU per op too.
func measure(b *testing.B, op func()) {
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkOverhead is one decision of two descriptors (the client's
// address and the path) from a ratelimitd on loopback (the service on
// memstore, envoyproxy's headers on), three ways on the same connection:
//
//   - raw: the generated gRPC stub with a request built once;
//   - client: what the middleware does per request: the descriptors built
//     from an *http.Request, Limiter.Decide with its deadline, the headers
//     copied into an http.Header;
//   - middleware: the whole net/http Handler (route matching included)
//     around a handler that does nothing.
//
// Compare client and middleware with raw, e.g. with -count 6 and benchstat.
func BenchmarkOverhead(b *testing.B) {
	rules, err := service.ParseRules(service.RulesFile{Name: "bench.yaml", YAML: []byte(benchRules)})
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New()
	b.Cleanup(func() { _ = st.Close() })
	svc, err := service.New(rules, st, service.WithHeaders(service.Headers{Classic: true}))
	if err != nil {
		b.Fatal(err)
	}
	remote, _ := serveRLS(b, svc)
	ctx := context.Background()
	limits := []client.RateLimit{{Actions: []client.Action{client.RemoteAddress()}}, {Actions: []client.Action{client.Path("")}}}
	httpReq := httptest.NewRequest(http.MethodGet, "/items/1", nil)
	httpReq.RemoteAddr = "127.0.0.1:40000"

	b.Run("raw", func(b *testing.B) {
		raw := rlsv3.NewRateLimitServiceClient(remote.Conn())
		req := &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "127.0.0.1"}}},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "path", Value: "/items/1"}}},
		}}
		measure(b, func() {
			resp, err := raw.ShouldRateLimit(ctx, req)
			if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				b.Fatal(resp, err)
			}
		})
	})
	b.Run("raw-deadline", func(b *testing.B) {
		raw := rlsv3.NewRateLimitServiceClient(remote.Conn())
		req := &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "127.0.0.1"}}},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "path", Value: "/items/1"}}},
		}}
		measure(b, func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := raw.ShouldRateLimit(ctx, req)
			if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				b.Fatal(resp, err)
			}
		})
	})
	b.Run("client", func(b *testing.B) {
		l := client.NewLimiter(remote, client.WithTimeout(10*time.Second), client.WithOnError(client.OnErrorUnavailable))
		var builder client.Builder
		h := http.Header{}
		measure(b, func() {
			d := l.Decide(ctx, &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: builder.HTTP(httpReq, limits)})
			if d.Verdict != client.Admitted {
				b.Fatal(d.Verdict, d.Err)
			}
			d.SetHeaders(h)
			clear(h)
		})
	})
	b.Run("middleware", func(b *testing.B) {
		l := client.NewLimiter(remote, client.WithTimeout(10*time.Second), client.WithOnError(client.OnErrorUnavailable))
		mw, err := middleware.New(l, middleware.Config{Domain: "bench", HTTP: []middleware.Route{{Pattern: "GET /items/{id}", RateLimits: limits}}})
		if err != nil {
			b.Fatal(err)
		}
		reached := 0
		h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }))
		w := &discardWriter{h: http.Header{}}
		measure(b, func() {
			h.ServeHTTP(w, httpReq)
			clear(w.h)
		})
		if reached != b.N {
			b.Fatalf("the handler ran %d times in %d requests", reached, b.N)
		}
	})
}
