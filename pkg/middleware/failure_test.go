package middleware_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/middleware"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// failureRules: /strict's rule answers for itself when Redis is down
// (on_store_error: deny), the others leave it to the client.
const failureRules = `
domain: conf
descriptors:
  - key: user
    descriptors:
      - {key: path, value: /open, rate_limit: {unit: minute, requests_per_unit: 5}}
      - {key: path, value: /strict, rate_limit: {unit: minute, requests_per_unit: 5, on_store_error: deny}}
      - {key: path, value: /grpc.health.v1.Health/Check, rate_limit: {unit: minute, requests_per_unit: 5}}
`

const failureRoutes = `
domain: conf
http:
  - pattern: "GET /{path}"
    rate_limits: [{actions: [{user: {}}, {path: {}}]}]
grpc:
  - method: /grpc.health.v1.Health/Check
    rate_limits: [{actions: [{user: {}}, {path: {}}]}]
`

// TestStoreDown stops a real Redis under both backends and checks each
// OnError: fail open admits (the handler runs, no rate limit headers since
// nothing was counted), fail closed denies with 429 or RESOURCE_EXHAUSTED,
// unavailable answers 503 or UNAVAILABLE. A rule's own on_store_error
// answers before the client's.
func TestStoreDown(t *testing.T) {
	redis := redistest.Start(t)
	st, err := redisstore.New(redisstore.WithAddr(redis.Addr), redisstore.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rules := parseRules(t, failureRules)
	remote, _ := serveRLS(t, newService(t, rules, st))
	core, logs := observer.New(zap.WarnLevel)
	rigs := storeDownRigs(t, map[string]client.Backend{"embedded": newService(t, rules, st), "remote": remote}, zap.New(core))

	// Redis up: every rig counts (user i has a counter of its own).
	for i, r := range rigs {
		user := fmt.Sprint("u", i)
		code, h := r.app.get(t, user, "/open")
		if code != http.StatusOK || h.Get("RateLimit-Remaining") != "4" {
			t.Fatalf("%s, Redis up: %d, RateLimit-Remaining %q; want 200 and 4", r.name, code, h.Get("RateLimit-Remaining"))
		}
	}

	redis.Stop()
	for i, r := range rigs {
		checkStoreDown(t, r, fmt.Sprint("u", i), redis.Addr)
	}
	// The log has the detail too: each middleware logs its first error of
	// the second (WithLogger samples).
	if n := logs.Len(); n < len(rigs) {
		t.Errorf("%d errors logged, want one per rig (%d) at least", n, len(rigs))
	}
	for _, e := range logs.All() {
		if err, _ := e.ContextMap()["error"].(string); !strings.Contains(err, redis.Addr) {
			t.Errorf("logged %q with error %q, want Redis's address in it", e.Message, err)
		}
	}
}

// storeDownWant is what a rig answers with Redis down: an HTTP status and
// a gRPC code.
type storeDownWant struct {
	status int
	code   codes.Code
}

// storeDownRig is an app whose middleware runs on one backend with one
// OnError, counting the errors its error handler sees and keeping the last.
type storeDownRig struct {
	name   string
	app    *app
	want   storeDownWant
	errors *atomic.Int64
	last   *atomic.Value // error
}

// storeDownModes are the client's OnError and what each answers.
var storeDownModes = []struct {
	name    string
	onError client.OnError
	want    storeDownWant
}{
	{"allow", client.OnErrorAllow, storeDownWant{http.StatusOK, codes.OK}},
	{"deny", client.OnErrorDeny, storeDownWant{http.StatusTooManyRequests, codes.ResourceExhausted}},
	{"unavailable", client.OnErrorUnavailable, storeDownWant{http.StatusServiceUnavailable, codes.Unavailable}},
}

// storeDownRigs starts one rig per backend and OnError.
func storeDownRigs(t *testing.T, backends map[string]client.Backend, log *zap.Logger) []storeDownRig {
	routes, err := middleware.Parse("routes.yaml", []byte(failureRoutes))
	if err != nil {
		t.Fatal(err)
	}
	var rigs []storeDownRig
	for _, bname := range []string{"embedded", "remote"} {
		for _, m := range storeDownModes {
			l := client.NewLimiter(backends[bname], client.WithTimeout(10*time.Second), client.WithOnError(m.onError))
			errs, last := new(atomic.Int64), new(atomic.Value)
			mw, err := middleware.New(l, routes, middleware.WithErrorHandler(func(_ context.Context, err error) {
				errs.Add(1)
				last.Store(err)
			}), middleware.WithLogger(log))
			if err != nil {
				t.Fatal(err)
			}
			rigs = append(rigs, storeDownRig{bname + "/" + m.name, startApp(t, mw), m.want, errs, last})
		}
	}
	return rigs
}

// checkStoreDown sends user's HTTP and gRPC calls to r with Redis down.
func checkStoreDown(t *testing.T, r storeDownRig, user, redisAddr string) {
	before := r.app.reached.Load()
	code, h, body := r.app.getBody(t, user, "/open")
	if code != r.want.status {
		t.Errorf("%s, Redis down: status %d, want %d", r.name, code, r.want.status)
	}
	if code == http.StatusServiceUnavailable && body != "rate limit unavailable\n" {
		t.Errorf("%s, Redis down: body %q, want only \"rate limit unavailable\"", r.name, body)
	}
	if got := rateLimitHeaders(h); len(got) != 0 {
		t.Errorf("%s, Redis down: rate limit headers %v, want none (nothing was counted)", r.name, got)
	}
	if ran := r.app.reached.Load() - before; (ran == 1) != (r.want.status == http.StatusOK) {
		t.Errorf("%s, Redis down: the handler ran %d times for status %d", r.name, ran, code)
	}

	ctx, cancel := userCtx(t, user)
	_, err := r.app.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
	cancel()
	if status.Code(err) != r.want.code {
		t.Errorf("%s, Redis down: gRPC %v, want %s", r.name, err, r.want.code)
	}
	if msg := status.Convert(err).Message(); r.want.code == codes.Unavailable && msg != "rate limit unavailable" {
		t.Errorf("%s, Redis down: gRPC message %q, want only \"rate limit unavailable\"", r.name, msg)
	}

	// The rule's on_store_error: deny is an answer, whatever the client's.
	if code, _ := r.app.get(t, user, "/strict"); code != http.StatusTooManyRequests {
		t.Errorf("%s, Redis down, on_store_error deny: status %d, want 429", r.name, code)
	}
	if n := r.errors.Load(); n != 2 {
		t.Errorf("%s: the error handler saw %d errors, want 2 (the HTTP and the gRPC call; /strict was answered)", r.name, n)
	}
	// The detail a caller is not shown reaches the handler.
	if err, _ := r.last.Load().(error); err == nil || !strings.Contains(err.Error(), redisAddr) {
		t.Errorf("%s: the error handler's last error %v does not name Redis (%s)", r.name, err, redisAddr)
	}
}
