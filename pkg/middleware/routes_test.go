package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/middleware"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// recorder passes requests to a real service and keeps the descriptors
// each carried, as key=value strings.
type recorder struct {
	client.Backend
	mu   sync.Mutex
	seen [][]string
}

func (r *recorder) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	var descs []string
	for _, d := range req.GetDescriptors() {
		var es []string
		for _, e := range d.GetEntries() {
			es = append(es, e.GetKey()+"="+e.GetValue())
		}
		descs = append(descs, strings.Join(es, ","))
	}
	r.mu.Lock()
	r.seen = append(r.seen, descs)
	r.mu.Unlock()
	return r.Backend.ShouldRateLimit(ctx, req)
}

// last is the descriptors of the one request since the previous call, or
// nil when the middleware asked nothing.
func (r *recorder) last(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { r.seen = nil }()
	switch len(r.seen) {
	case 0:
		return nil
	case 1:
		return r.seen[0]
	default:
		t.Fatalf("%d decisions for one request", len(r.seen))
		return nil
	}
}

func route(pattern, name string) middleware.Route {
	return middleware.Route{Pattern: pattern, RateLimits: []client.RateLimit{{Actions: []client.Action{client.GenericKey("route", name)}}}}
}

func newRecorded(t *testing.T, cfg middleware.Config) (*middleware.Middleware, *recorder) {
	t.Helper()
	rec := &recorder{Backend: memService(t, parseRules(t, "domain: d\n"), storetest.NewClock(storetest.Epoch()))}
	mw, err := middleware.New(client.NewLimiter(rec), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mw, rec
}

// TestHTTPRoutes: the most specific ServeMux pattern decides which rate
// limits a request gets; a request no pattern takes is not limited.
func TestHTTPRoutes(t *testing.T) {
	mw, rec := newRecorded(t, middleware.Config{Domain: "d", HTTP: []middleware.Route{
		route("GET /items/{id}", "item"),
		route("GET /items/special", "special"),
		route("POST /items/", "post"),
		route("api.example.com/", "api-host"),
	}})
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	cases := []struct {
		method, url string
		want        []string
	}{
		{"GET", "http://example.com/items/7", []string{"route=item"}},
		{"HEAD", "http://example.com/items/7", []string{"route=item"}},
		{"GET", "http://example.com/items/special", []string{"route=special"}},
		{"POST", "http://example.com/items/7/parts", []string{"route=post"}},
		{"GET", "http://api.example.com/anything", []string{"route=api-host"}},
		{"DELETE", "http://example.com/items/7", nil},
		{"GET", "http://example.com/other", nil},
		// ServeMux would redirect this to /items/7: not a route's request.
		{"GET", "http://example.com/items//7", nil},
	}
	for _, tc := range cases {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest(tc.method, tc.url, nil))
		if got := rec.last(t); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s: descriptors %q, want %q", tc.method, tc.url, got, tc.want)
		}
		if rr.Code != http.StatusOK {
			t.Errorf("%s %s: status %d", tc.method, tc.url, rr.Code)
		}
	}
}

// TestGRPCRoutes: an exact method wins over its service's wildcard.
func TestGRPCRoutes(t *testing.T) {
	mw, rec := newRecorded(t, middleware.Config{Domain: "d", GRPC: []middleware.Route{
		route("/echo.v1.Echo/*", "echo"),
		route("/echo.v1.Echo/Say", "say"),
	}})
	unary := mw.UnaryServerInterceptor()
	handler := func(context.Context, any) (any, error) { return "done", nil }
	for method, want := range map[string][]string{
		"/echo.v1.Echo/Say":     {"route=say"},
		"/echo.v1.Echo/Shout":   {"route=echo"},
		"/other.v1.Other/Say":   nil,
		"/echo.v1.EchoMore/Say": nil,
	} {
		out, err := unary(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
		if err != nil || out != "done" {
			t.Errorf("%s: %v, %v", method, out, err)
		}
		if got := rec.last(t); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: descriptors %q, want %q", method, got, want)
		}
	}
}

// TestConfigErrors: what New refuses, every error at once.
func TestConfigErrors(t *testing.T) {
	cfg := middleware.Config{
		HTTP: []middleware.Route{
			route("GET /a/{x}", "a"),
			route("GET /a/{y}", "b"),
			{Pattern: "/b"},
			{Pattern: "/c", RateLimits: []client.RateLimit{{Actions: []client.Action{{}}}}},
		},
		GRPC: []middleware.Route{route("Echo/Say", "x"), route("/e.E/*", "y"), route("/e.E/*", "z")},
	}
	_, err := middleware.New(client.NewLimiter(nil), cfg)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"domain: empty",
		`http[1].pattern: pattern "GET /a/{y}" conflicts with pattern "GET /a/{x}": GET /a/{y} matches the same requests as GET /a/{x} (the route "GET /a/{x}")`,
		"http[2].rate_limits: empty",
		"http[3].rate_limits[0]: actions[0]: the zero Action",
		`grpc[0].method: "Echo/Say" is not a full method`,
		`grpc[2].method: "/e.E/*" repeats the route "/e.E/*"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestMalformedNeverFailsOpen: a header value over the service's length cap
// makes a request the service refuses (INVALID_ARGUMENT); even under
// OnErrorAllow it gets 400 or INVALID_ARGUMENT and never reaches the
// handler, so a client cannot skip its limit with a long header.
func TestMalformedNeverFailsOpen(t *testing.T) {
	st := memstore.New(memstore.WithClock(storetest.Epoch))
	t.Cleanup(func() { _ = st.Close() })
	svc, err := service.New(parseRules(t, "domain: d\n"), st, service.WithLimits(0, 0, 8))
	if err != nil {
		t.Fatal(err)
	}
	limits := []client.RateLimit{{Actions: []client.Action{client.RequestHeader("x-key", "key", false)}}}
	mw, err := middleware.New(client.NewLimiter(svc, client.WithOnError(client.OnErrorAllow)), middleware.Config{
		Domain: "d",
		HTTP:   []middleware.Route{{Pattern: "/", RateLimits: limits}},
		GRPC:   []middleware.Route{{Pattern: "/grpc.health.v1.Health/*", RateLimits: limits}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, mw)
	for key, want := range map[string]int{"12345678": http.StatusOK, "123456789": http.StatusBadRequest} {
		req, _ := http.NewRequest(http.MethodGet, a.url+"/", nil)
		req.Header.Set("X-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("x-key of %d bytes: status %d, want %d", len(key), resp.StatusCode, want)
		}
		ctx := metadata.AppendToOutgoingContext(t.Context(), "x-key", key)
		_, err = a.health.Check(ctx, &healthpb.HealthCheckRequest{})
		if wantCode := map[int]codes.Code{http.StatusOK: codes.OK, http.StatusBadRequest: codes.InvalidArgument}[want]; status.Code(err) != wantCode {
			t.Errorf("x-key of %d bytes over gRPC: %v, want %s", len(key), err, wantCode)
		}
	}
	if n := a.reached.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once (for the short key)", n)
	}
}
