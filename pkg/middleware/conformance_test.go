package middleware_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/middleware"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// conformanceRules has a rule per algorithm, two with several limits
// (rate_limits), and a remote_address rule for 127.0.0.1 only, so that a
// middleware sending any other address, user or path than /json is sent
// would match another rule and answer differently.
const conformanceRules = `
domain: conf
descriptors:
  - key: user
    descriptors:
      - {key: path, value: /fixed, rate_limit: {unit: minute, requests_per_unit: 3}}
      - {key: path, value: /sliding, rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding_window}}
      - {key: path, value: /log, rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding_log}}
      - {key: path, value: /bucket, rate_limit: {unit: minute, requests_per_unit: 20, burst: 2, algorithm: token_bucket}}
      - {key: path, value: /leaky, rate_limit: {unit: minute, requests_per_unit: 20, burst: 2, algorithm: leaky_bucket}}
      - {key: path, value: /gcra, rate_limit: {unit: minute, requests_per_unit: 20, burst: 2, algorithm: gcra}}
      - key: path
        value: /multi
        rate_limits:
          - {unit: second, requests_per_unit: 2, name: burst}
          - {unit: minute, requests_per_unit: 4, name: sustained, algorithm: sliding_window}
      - key: path
        value: /grpc.health.v1.Health/Check
        rate_limits:
          - {unit: second, requests_per_unit: 1, burst: 1, name: check_rate, algorithm: gcra}
          - {unit: minute, requests_per_unit: 5, name: check_budget, algorithm: token_bucket}
      - {key: path, value: /grpc.health.v1.Health/Watch, rate_limit: {unit: minute, requests_per_unit: 2, name: watch}}
  - key: remote_address
    value: 127.0.0.1
    rate_limit: {unit: minute, requests_per_unit: 40, algorithm: sliding_window}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1000}
`

// conformanceRoutes limits every one-segment path and every health call
// per user and path, and per client address.
const conformanceRoutes = `
domain: conf
http:
  - pattern: "GET /{path}"
    rate_limits:
      - actions: [{user: {}}, {path: {}}]
      - actions: [{remote_address: {}}]
grpc:
  - method: /grpc.health.v1.Health/*
    rate_limits:
      - actions: [{user: {}}, {path: {}}]
      - actions: [{remote_address: {}}]
`

type via int

const (
	viaHTTP via = iota
	viaUnary
	viaStream
)

type step struct {
	via        via
	user, path string
}

// conformanceSteps: six rounds of every path, over HTTP and both gRPC call
// kinds; bob takes round 4, nobody (no user, so the address only) one call
// of round 5.
func conformanceSteps() []step {
	paths := []string{"/fixed", "/sliding", "/log", "/bucket", "/leaky", "/gcra", "/multi"}
	var steps []step
	for round := range 6 {
		user := "alice"
		if round == 4 {
			user = "bob"
		}
		for _, p := range paths {
			u := user
			if round == 5 && p == "/fixed" {
				u = ""
			}
			steps = append(steps, step{viaHTTP, u, p})
		}
		steps = append(steps,
			step{viaUnary, user, "/grpc.health.v1.Health/Check"},
			step{viaStream, user, "/grpc.health.v1.Health/Watch"})
	}
	return steps
}

// jsonRequest is the request the routes should make of s: built here by
// hand, not by the client package.
func jsonRequest(s step) *rlsv3.RateLimitRequest {
	entry := func(k, v string) *ratelimitv3.RateLimitDescriptor_Entry {
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	req := &rlsv3.RateLimitRequest{Domain: "conf"}
	if s.user != "" {
		req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("user", s.user), entry("path", s.path)}})
	}
	req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("remote_address", "127.0.0.1")}})
	return req
}

// answer is what a limited service answered: the HTTP status (gRPC codes
// mapped to 200 and 429), the rate limit headers, and for a gRPC denial the
// RetryInfo delay.
type answer struct {
	status     int
	headers    map[string][]string
	retryInfo  time.Duration
	hasRetryIn bool
}

func (a *app) call(t *testing.T, s step) answer {
	t.Helper()
	switch s.via {
	case viaHTTP:
		code, h := a.get(t, s.user, s.path)
		return answer{status: code, headers: rateLimitHeaders(h)}
	case viaUnary:
		ctx, cancel := userCtx(t, s.user)
		defer cancel()
		var md metadata.MD
		_, err := a.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		return grpcAnswer(t, err, md)
	default:
		ctx, cancel := userCtx(t, s.user)
		defer cancel()
		stream, err := a.health.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		md, _ := stream.Header()
		return grpcAnswer(t, err, md)
	}
}

func grpcAnswer(t *testing.T, err error, md metadata.MD) answer {
	t.Helper()
	a := answer{status: http.StatusOK, headers: rateLimitHeaders(md)}
	switch status.Code(err) {
	case codes.OK:
		return a
	case codes.ResourceExhausted:
		a.status = http.StatusTooManyRequests
	default:
		t.Fatalf("gRPC call: %v, want OK or ResourceExhausted", err)
	}
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			a.retryInfo, a.hasRetryIn = ri.GetRetryDelay().AsDuration(), true
		}
	}
	return a
}

// TestConformance runs the same requests through the middleware (HTTP,
// unary and stream) over the Embedded and the Remote backend and asks a
// third service's /json the same, each service on its own memstore reading
// one stepped clock: every status and every rate limit header must be
// /json's, for every algorithm and for several limits per descriptor.
func TestConformance(t *testing.T) {
	rules := parseRules(t, conformanceRules)
	routes, err := middleware.Parse("routes.yaml", []byte(conformanceRoutes))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch())
	jsonURL := serveJSON(t, memService(t, rules, clock))
	remote, _ := serveRLS(t, memService(t, rules, clock))
	backends := []struct {
		name    string
		backend client.Backend
	}{
		{"embedded", memService(t, rules, clock)},
		{"remote", remote},
	}
	apps := make([]*app, len(backends))
	for i, b := range backends {
		// A generous deadline and no failing open: a slow call on a busy
		// machine must fail the test, not pass for an admission.
		l := client.NewLimiter(b.backend, client.WithTimeout(10*time.Second), client.WithOnError(client.OnErrorUnavailable))
		mw, err := middleware.New(l, routes)
		if err != nil {
			t.Fatal(err)
		}
		apps[i] = startApp(t, mw)
	}

	denied := map[string]int{}
	admitted := map[string]int{}
	var twoPolicies bool
	for i, s := range conformanceSteps() {
		want := askJSON(t, jsonURL, jsonRequest(s))
		if len(want.headers["ratelimit-limit"]) != 1 || len(want.headers["ratelimit"]) != 1 {
			t.Fatalf("step %d: /json answered without the rate limit headers: %v", i, want.headers)
		}
		for j, a := range apps {
			got := a.call(t, s)
			where := fmt.Sprintf("step %d (%+v, t=%s) via %s", i, s, clock.Now().Sub(storetest.Epoch()), backends[j].name)
			checkAnswer(t, where, s, got, want)
		}
		if want.status == http.StatusTooManyRequests {
			denied[s.path]++
		} else {
			admitted[s.path]++
		}
		twoPolicies = twoPolicies || strings.Contains(strings.Join(want.headers["ratelimit-policy"], ""), ", ")
		clock.Advance(700 * time.Millisecond)
	}
	// The sequence must exercise what it claims to: every rule admits and
	// denies, and a descriptor with two limits lists both.
	for _, s := range conformanceSteps()[:9] {
		if admitted[s.path] == 0 || denied[s.path] == 0 {
			t.Errorf("%s: %d admitted, %d denied: the steps do not exercise its limit", s.path, admitted[s.path], denied[s.path])
		}
	}
	t.Logf("admitted %v, denied %v", admitted, denied)
	if !twoPolicies {
		t.Error("no answer listed two limits in RateLimit-Policy")
	}
	if n := apps[0].reached.Load(); n != int64(totalAdmittedHTTP(admitted)) {
		t.Errorf("the embedded app's handler ran %d times, want the %d admitted HTTP requests", n, totalAdmittedHTTP(admitted))
	}
}

func totalAdmittedHTTP(admitted map[string]int) int {
	n := 0
	for p, k := range admitted {
		if !strings.HasPrefix(p, "/grpc.") {
			n += k
		}
	}
	return n
}

func checkAnswer(t *testing.T, where string, s step, got answer, want jsonAnswer) {
	t.Helper()
	if got.status != want.status {
		t.Errorf("%s: status %d, /json answered %d", where, got.status, want.status)
	}
	if !reflect.DeepEqual(got.headers, want.headers) {
		t.Errorf("%s: headers\n%v\n/json's:\n%v", where, got.headers, want.headers)
	}
	if want.status != http.StatusTooManyRequests {
		return
	}
	ra := want.headers["retry-after"]
	if len(ra) != 1 {
		t.Fatalf("%s: /json denied without one Retry-After: %v", where, want.headers)
	}
	if s.via == viaHTTP {
		return
	}
	secs, _ := strconv.Atoi(ra[0])
	if !got.hasRetryIn || got.retryInfo != time.Duration(secs)*time.Second {
		t.Errorf("%s: RetryInfo %s (present %v), want Retry-After's %ss", where, got.retryInfo, got.hasRetryIn, ra[0])
	}
}
