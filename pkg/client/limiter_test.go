package client_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func embedded(t *testing.T, rules *service.Rules, opts ...service.Option) *service.Service {
	t.Helper()
	st := memstore.New(memstore.WithClock(storetest.Epoch))
	t.Cleanup(func() { _ = st.Close() })
	svc, err := service.New(rules, st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func rules(t *testing.T) *service.Rules {
	t.Helper()
	r, err := service.ParseRules(service.RulesFile{Name: "api.yaml", YAML: []byte(apiRules)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// remoteOf serves svc over gRPC on loopback; stop ends the server.
func remoteOf(t *testing.T, svc *service.Service) (c *client.Client, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(svc.GRPCServerOptions()...)
	svc.RegisterGRPC(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return dial(t, ln.Addr().String()), srv.Stop
}

// hung accepts connections and never answers, as a wedged server does.
func hung(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		_ = ln.Close()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				<-done
				_ = c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestLimiterVerdicts: answers are verdicts; a backend that cannot decide
// (no rules, a stopped server, a hung server past the deadline) gives the
// OnError verdict with the error; a malformed request and a caller that
// gave up fail whatever OnError says.
func TestLimiterVerdicts(t *testing.T) {
	alice := client.Descriptor{{Key: "user", Value: "alice"}}
	stopped, stop := remoteOf(t, embedded(t, rules(t)))
	if d := client.NewLimiter(stopped, client.WithTimeout(10*time.Second)).Check(t.Context(), "api", 0, alice); d.Verdict != client.Admitted || d.Err != nil {
		t.Fatalf("before the stop: %v %v", d.Verdict, d.Err)
	}
	stop()
	canceled, cancel := context.WithCancel(t.Context())
	cancel()

	undecided := []struct {
		name    string
		backend client.Backend
		timeout time.Duration
		code    codes.Code
	}{
		{"no rules", embedded(t, nil), 10 * time.Second, codes.Unavailable},
		{"server stopped", stopped, 10 * time.Second, codes.Unavailable},
		{"server hung", dial(t, hung(t)), 200 * time.Millisecond, codes.DeadlineExceeded},
	}
	for _, u := range undecided {
		for _, m := range []struct {
			onError client.OnError
			want    client.Verdict
		}{{client.OnErrorAllow, client.Admitted}, {client.OnErrorDeny, client.Denied}, {client.OnErrorUnavailable, client.Failed}} {
			d := client.NewLimiter(u.backend, client.WithTimeout(u.timeout), client.WithOnError(m.onError)).Check(t.Context(), "api", 0, alice)
			if d.Verdict != m.want || status.Code(d.Err) != u.code || d.Response != nil {
				t.Errorf("%s, OnError %d: %v %v (response %v), want %v with %s", u.name, m.onError, d.Verdict, d.Err, d.Response, m.want, u.code)
			}
			if d.Allowed() != (m.want == client.Admitted) {
				t.Errorf("%s, OnError %d: Allowed %v for %v", u.name, m.onError, d.Allowed(), d.Verdict)
			}
		}
	}

	small := embedded(t, rules(t), service.WithLimits(0, 0, 8))
	// Over gRPC, a request larger than the caps admit is refused from its
	// length prefix with RESOURCE_EXHAUSTED: as malformed as a value over
	// the cap, and a client sending a long header must not skip its limit.
	smallRemote, _ := remoteOf(t, small)
	failing := []struct {
		name    string
		backend client.Backend
		ctx     context.Context
		desc    client.Descriptor
		code    codes.Code
	}{
		{"value over the cap", small, t.Context(), client.Descriptor{{Key: "user", Value: strings.Repeat("x", 9)}}, codes.InvalidArgument},
		{"request over the server's size cap", smallRemote, t.Context(), client.Descriptor{{Key: "user", Value: strings.Repeat("x", 1<<20)}}, codes.InvalidArgument},
		{"caller gone", small, canceled, alice, codes.Canceled},
	}
	for _, f := range failing {
		for _, onError := range []client.OnError{client.OnErrorAllow, client.OnErrorDeny, client.OnErrorUnavailable} {
			d := client.NewLimiter(f.backend, client.WithTimeout(10*time.Second), client.WithOnError(onError)).Check(f.ctx, "api", 0, f.desc)
			if d.Verdict != client.Failed || status.Code(d.Err) != f.code {
				t.Errorf("%s, OnError %d: %v %v, want failed with %s", f.name, onError, d.Verdict, d.Err, f.code)
			}
		}
	}
}

// TestLimiterAnswers: OK and OVER_LIMIT are Admitted and Denied, with the
// service's headers and Retry-After.
func TestLimiterAnswers(t *testing.T) {
	svc := embedded(t, rules(t), service.WithHeaders(service.Headers{Classic: true, RetryAfter: true}))
	l := client.NewLimiter(svc)
	alice := client.Descriptor{{Key: "user", Value: "alice"}}
	var d client.Decision
	for range 4 {
		d = l.Check(t.Context(), "api", 0, alice)
	}
	// storetest.Epoch is on a minute boundary: the window ends in 60 s.
	after, ok := d.RetryAfter()
	if d.Verdict != client.Denied || d.Err != nil || !ok || after != time.Minute {
		t.Fatalf("4th of 3: %v %v, Retry-After %s %v; want denied, 60s", d.Verdict, d.Err, after, ok)
	}
	md := d.Metadata()
	if got := md.Get("ratelimit-remaining"); len(got) != 1 || got[0] != "0" || len(md.Get("retry-after")) != 1 {
		t.Errorf("metadata %v", md)
	}
	h := map[string][]string{}
	d.SetHeaders(h)
	if len(h) != 4 {
		t.Errorf("headers %v, want RateLimit-Limit/Remaining/Reset and Retry-After", h)
	}
	if d := l.Check(t.Context(), "api", 0, client.Descriptor{{Key: "user", Value: "bob"}}); d.Verdict != client.Admitted {
		t.Errorf("bob: %v", d.Verdict)
	}
}
