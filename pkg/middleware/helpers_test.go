package middleware_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/middleware"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// allHeaders is every header the service can add: envoyproxy's, the
// draft's and Retry-After.
var allHeaders = service.Headers{Classic: true, Draft: true, RetryAfter: true}

func parseRules(t testing.TB, yaml string) *service.Rules {
	t.Helper()
	rules, err := service.ParseRules(service.RulesFile{Name: "rules.yaml", YAML: []byte(yaml)})
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// newService is the service on st with every header on.
func newService(t testing.TB, rules *service.Rules, st store.Store) *service.Service {
	t.Helper()
	svc, err := service.New(rules, st, service.WithHeaders(allHeaders))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// memService is the service on its own memstore reading clock.
func memService(t testing.TB, rules *service.Rules, clock *storetest.Clock) *service.Service {
	t.Helper()
	st := memstore.New(memstore.WithClock(clock.Now))
	t.Cleanup(func() { _ = st.Close() })
	return newService(t, rules, st)
}

// listen is a loopback listener on a port the kernel picked.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// serveRLS serves svc's RateLimitService on loopback, as ratelimitd does,
// and returns a Client of it and the server, to stop early.
func serveRLS(t testing.TB, svc *service.Service) (*client.Client, *grpc.Server) {
	t.Helper()
	ln := listen(t)
	srv := grpc.NewServer(svc.GRPCServerOptions()...)
	svc.RegisterGRPC(srv)
	go func() { _ = srv.Serve(ln) }()
	c, err := client.Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		srv.Stop()
	})
	return c, srv
}

// jsonAnswer is the service's /json answer to a request: its HTTP status
// and the headers it asks Envoy to add.
type jsonAnswer struct {
	status  int
	headers map[string][]string
}

// askJSON posts req to a /json endpoint.
func askJSON(t testing.TB, url string, req *rlsv3.RateLimitRequest) jsonAnswer {
	t.Helper()
	body, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/json", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var rls rlsv3.RateLimitResponse
	if err := protojson.Unmarshal(out, &rls); err != nil {
		t.Fatalf("/json answered %d %q: %v", resp.StatusCode, out, err)
	}
	h := map[string][]string{}
	for _, hv := range rls.GetResponseHeadersToAdd() {
		k := strings.ToLower(hv.GetKey())
		h[k] = append(h[k], hv.GetValue())
	}
	return jsonAnswer{status: resp.StatusCode, headers: h}
}

// serveJSON serves svc's /json (and /healthcheck) on loopback.
func serveJSON(t testing.TB, svc *service.Service) string {
	t.Helper()
	mux := http.NewServeMux()
	svc.RegisterHTTP(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// rateLimitHeaders keeps the headers the service can add, with lower-case
// names, from an HTTP response or gRPC metadata.
func rateLimitHeaders(h map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range h {
		k = strings.ToLower(k)
		if strings.HasPrefix(k, "ratelimit") || k == "retry-after" {
			out[k] = append(out[k], v...)
		}
	}
	return out
}

// withUserHeader is the authentication a real service has in front of the
// limiter: here the user is whatever X-User says.
func withUserHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get("X-User"); u != "" {
			r = r.WithContext(client.WithUser(r.Context(), u))
		}
		next.ServeHTTP(w, r)
	})
}

// userUnary and userStream do the same from the x-user metadata.
func userUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(userContext(ctx), req)
}

func userStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &userServerStream{ServerStream: ss, ctx: userContext(ss.Context())})
}

type userServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *userServerStream) Context() context.Context { return s.ctx }

func userContext(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	if u := md.Get("x-user"); len(u) > 0 {
		return client.WithUser(ctx, u[0])
	}
	return ctx
}

// app is a service limited by mw: an HTTP server whose handler answers
// "ok" (counting calls) and a gRPC server with the health service.
type app struct {
	url     string
	health  healthpb.HealthClient
	reached atomic.Int64
}

func startApp(t testing.TB, mw *middleware.Middleware) *app {
	t.Helper()
	a := &app{}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.reached.Add(1)
		_, _ = io.WriteString(w, "ok")
	})
	hs := httptest.NewServer(withUserHeader(mw.Handler(ok)))
	t.Cleanup(hs.Close)
	a.url = hs.URL

	ln := listen(t)
	gs := grpc.NewServer(
		grpc.ChainUnaryInterceptor(userUnary, mw.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(userStream, mw.StreamServerInterceptor()),
	)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	a.health = healthpb.NewHealthClient(conn)
	return a
}

// get sends GET path as user ("" for none) and returns the status and the
// response's headers.
func (a *app) get(t testing.TB, user, path string) (int, http.Header) {
	t.Helper()
	code, h, _ := a.getBody(t, user, path)
	return code, h
}

// getBody is get, also returning the response's body.
func (a *app) getBody(t testing.TB, user, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("X-User", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header, string(body)
}

func userCtx(t testing.TB, user string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	if user != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-user", user)
	}
	return ctx, cancel
}
