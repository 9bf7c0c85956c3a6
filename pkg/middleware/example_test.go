package middleware_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/middleware"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// authenticate stands for a service's real authentication: it puts the
// caller's user id in the request's context for the User action.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user := r.Header.Get("X-User"); user != "" {
			r = r.WithContext(client.WithUser(r.Context(), user))
		}
		next.ServeHTTP(w, r)
	})
}

// A net/http server limited per user and path, with the service embedded
// in the process (rules in envoyproxy's YAML, counters in memory). For a
// ratelimitd over gRPC instead, the limiter's backend is client.Dial's
// Client; nothing else changes.
func Example_http() {
	rules, err := service.ParseRules(service.RulesFile{Name: "api.yaml", YAML: []byte(`
domain: api
descriptors:
  - key: user
    descriptors:
      - key: path   # no value: each path counts on its own
        rate_limit: {unit: hour, requests_per_unit: 2}
`)})
	if err != nil {
		log.Fatal(err)
	}
	st := memstore.New()
	defer st.Close()
	svc, err := service.New(rules, st, service.WithHeaders(service.Headers{Classic: true, RetryAfter: true}))
	if err != nil {
		log.Fatal(err)
	}
	mw, err := middleware.New(client.NewLimiter(svc), middleware.Config{
		Domain: "api",
		HTTP: []middleware.Route{{
			Pattern:    "GET /items/{id}",
			RateLimits: []client.RateLimit{{Actions: []client.Action{client.User(""), client.Path("")}}},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "item", r.PathValue("id"))
	})
	srv := httptest.NewServer(authenticate(mw.Handler(mux)))
	defer srv.Close()

	for _, path := range []string{"/items/1", "/items/1", "/items/1", "/items/2"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("X-User", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode, "remaining", resp.Header.Get("RateLimit-Remaining"),
			"retry after set:", resp.Header.Get("Retry-After") != "")
	}
	// Output:
	// /items/1 200 remaining 1 retry after set: false
	// /items/1 200 remaining 0 retry after set: false
	// /items/1 429 remaining 0 retry after set: true
	// /items/2 200 remaining 1 retry after set: false
}

// A gRPC server limited per method: every method of the health service
// has its own counter, keyed by its full method name.
func Example_grpc() {
	rules, err := service.ParseRules(service.RulesFile{Name: "grpc.yaml", YAML: []byte(`
domain: grpc
descriptors:
  - key: method
    value: /grpc.health.v1.Health/Check
    rate_limit: {unit: hour, requests_per_unit: 2}
`)})
	if err != nil {
		log.Fatal(err)
	}
	st := memstore.New()
	defer st.Close()
	svc, err := service.New(rules, st, service.WithHeaders(service.Headers{Classic: true}))
	if err != nil {
		log.Fatal(err)
	}
	mw, err := middleware.New(client.NewLimiter(svc), middleware.Config{
		Domain: "grpc",
		GRPC: []middleware.Route{{
			Pattern:    "/grpc.health.v1.Health/*",
			RateLimits: []client.RateLimit{{Actions: []client.Action{client.Path("method")}}},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer(
		grpc.ChainUnaryInterceptor(mw.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(mw.StreamServerInterceptor()),
	)
	healthpb.RegisterHealthServer(server, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = server.Serve(ln) }()
	defer server.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	healthClient := healthpb.NewHealthClient(conn)
	for range 3 {
		var md metadata.MD
		_, err := healthClient.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		fmt.Println(status.Code(err), "remaining", md.Get("ratelimit-remaining"))
	}
	// Output:
	// OK remaining [1]
	// OK remaining [0]
	// ResourceExhausted remaining [0]
}

// A routes file is strict: its errors name the file, the line and the
// field, all at once.
func ExampleParse() {
	_, err := middleware.Parse("routes.yaml", []byte(`
domain: api
http:
  - pattern: "GET /items/{id}"
    rate_limits:
      - actions:
          - user: {}
          - request_headers: {header_name: x-api-key}
`))
	fmt.Println(err)
	// Output:
	// routes.yaml:8: http[0].rate_limits[0].actions[1].request_headers.descriptor_key: missing
}
