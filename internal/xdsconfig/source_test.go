package xdsconfig_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/xdsconfig"
)

const nodeID = "envoy-ratelimit"

// xdsServer is go-control-plane's own ADS server over a snapshot cache, as
// Envoy Gateway runs it.
type xdsServer struct {
	addr  string
	cache cachev3.SnapshotCache
	grpc  *grpc.Server
	reqs  chan *discoveryv3.DiscoveryRequest

	mu     sync.Mutex
	nonces map[string]string // response nonce -> version
}

func startServer(t *testing.T, addr string, cache cachev3.SnapshotCache, opts ...grpc.ServerOption) *xdsServer {
	t.Helper()
	if cache == nil {
		cache = cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	}
	s := &xdsServer{cache: cache, reqs: make(chan *discoveryv3.DiscoveryRequest, 1000), nonces: map[string]string{}}
	cb := serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
			select {
			case s.reqs <- r:
			default: // a test that stopped reading
			}
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoveryv3.DiscoveryRequest, r *discoveryv3.DiscoveryResponse) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.nonces[r.GetNonce()] = r.GetVersionInfo()
		},
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.grpc = grpc.NewServer(opts...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(s.grpc, serverv3.NewServer(context.Background(), cache, cb))
	go func() { _ = s.grpc.Serve(ln) }()
	t.Cleanup(s.grpc.Stop)
	return s
}

func (s *xdsServer) set(t *testing.T, version string, cfgs ...*rlsconfv3.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, 0, len(cfgs))
	for _, c := range cfgs {
		res = append(res, c)
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cache.SetSnapshot(context.Background(), nodeID, snap); err != nil {
		t.Fatal(err)
	}
}

// answer waits for the client's answer to a response of version: an ACK
// (its version echoed, no error) or a NACK (error detail set).
func (s *xdsServer) answer(t *testing.T, version string) *discoveryv3.DiscoveryRequest {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case r := <-s.reqs:
			if r.GetResponseNonce() == "" {
				continue // a (re)subscription, not an answer
			}
			s.mu.Lock()
			v := s.nonces[r.GetResponseNonce()]
			s.mu.Unlock()
			if v == version {
				return r
			}
		case <-deadline:
			t.Fatalf("no ACK/NACK for version %s", version)
		}
	}
}

func limit(name, domain, key string, rpu uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key: key, RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: rpu},
	}}}
}

func fastBackoff() xdsconfig.Option {
	return xdsconfig.WithBackoff(xdsconfig.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond})
}

type updates struct {
	mu   sync.Mutex
	errs []error
}

func (u *updates) record(_ *config.Config, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.errs = append(u.errs, err)
}

func (u *updates) last() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.errs[len(u.errs)-1]
}

func run(t *testing.T, target string, opts ...xdsconfig.Option) *xdsconfig.Source {
	t.Helper()
	src, err := xdsconfig.New(target, append([]xdsconfig.Option{xdsconfig.WithNodeID(nodeID), fastBackoff()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return src
}

func rpu(t *testing.T, src *xdsconfig.Source, domain, key string) uint32 {
	t.Helper()
	cfg := src.Current()
	if cfg == nil {
		t.Fatal("no config")
	}
	r := cfg.Match(domain, []config.Entry{{Key: key}})
	if r == nil {
		t.Fatalf("no rule for %s/%s in %v", domain, key, cfg.Domains())
	}
	return r.RequestsPerUnit
}

// TestSubscription walks one subscription through good and bad updates:
// each good one is ACKed and in force, each bad one NACKed with the
// loader's error while the last good config stays.
func TestSubscription(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	var ups updates
	srv.set(t, "1", limit("a", "edge", "remote_address", 10))
	src := run(t, srv.addr, xdsconfig.WithOnUpdate(ups.record))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := src.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if r := srv.answer(t, "1"); r.GetErrorDetail() != nil || r.GetNode().GetId() != nodeID || r.GetTypeUrl() != xdsconfig.TypeURL {
		t.Fatalf("initial answer %v", r)
	}
	if got := rpu(t, src, "edge", "remote_address"); got != 10 {
		t.Fatalf("initial limit %d, want 10", got)
	}

	badUnit := limit("b", "api", "path", 5)
	badUnit.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	steps := []struct {
		name    string
		cfgs    []*rlsconfv3.RateLimitConfig
		nack    []string // substrings of the error detail; nil = ACK
		edgeRPU uint32
	}{
		{name: "update", cfgs: []*rlsconfv3.RateLimitConfig{limit("a", "edge", "remote_address", 20)}, edgeRPU: 20},
		{name: "unknown unit", cfgs: []*rlsconfv3.RateLimitConfig{limit("a", "edge", "remote_address", 30), badUnit},
			nack: []string{"xds resource b", "descriptors[0].rate_limit.unit"}, edgeRPU: 20},
		{name: "duplicate domain", cfgs: []*rlsconfv3.RateLimitConfig{limit("a", "edge", "remote_address", 30), limit("c", "edge", "path", 1)},
			nack: []string{"xds resource c", "edge"}, edgeRPU: 20},
		{name: "fixed", cfgs: []*rlsconfv3.RateLimitConfig{limit("a", "edge", "remote_address", 40), limit("b", "api", "path", 5)}, edgeRPU: 40},
	}
	for i, st := range steps {
		version := string(rune('2' + i))
		srv.set(t, version, st.cfgs...)
		r := srv.answer(t, version)
		if st.nack == nil {
			if r.GetErrorDetail() != nil {
				t.Fatalf("%s: NACK %q, want ACK", st.name, r.GetErrorDetail().GetMessage())
			}
			if ups.last() != nil {
				t.Fatalf("%s: update error %v", st.name, ups.last())
			}
		} else {
			if r.GetErrorDetail() == nil {
				t.Fatalf("%s: ACK, want NACK", st.name)
			}
			for _, want := range st.nack {
				if !strings.Contains(r.GetErrorDetail().GetMessage(), want) {
					t.Errorf("%s: NACK detail %q lacks %q", st.name, r.GetErrorDetail().GetMessage(), want)
				}
			}
			if r.GetVersionInfo() == version {
				t.Errorf("%s: NACK carries the rejected version %s", st.name, version)
			}
			if ups.last() == nil {
				t.Errorf("%s: update callback saw no error", st.name)
			}
		}
		if got := rpu(t, src, "edge", "remote_address"); got != st.edgeRPU {
			t.Errorf("%s: limit %d, want %d", st.name, got, st.edgeRPU)
		}
	}
	if got := rpu(t, src, "api", "path"); got != 5 {
		t.Errorf("api limit %d, want 5", got)
	}
}

// TestReconnect restarts the xDS server on the same address: the client
// reconnects with backoff and picks up what the new server holds.
func TestReconnect(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	srv.set(t, "1", limit("a", "edge", "remote_address", 10))
	src := run(t, srv.addr)
	srv.answer(t, "1")

	srv.grpc.Stop()
	// The config stays in force while the server is away.
	if got := rpu(t, src, "edge", "remote_address"); got != 10 {
		t.Fatalf("limit %d after the server went away, want 10", got)
	}
	next := startServer(t, srv.addr, nil)
	next.set(t, "2", limit("a", "edge", "remote_address", 99))
	r := next.answer(t, "2")
	if r.GetErrorDetail() != nil {
		t.Fatalf("NACK %v", r.GetErrorDetail())
	}
	if got := rpu(t, src, "edge", "remote_address"); got != 99 {
		t.Fatalf("limit %d after reconnecting, want 99", got)
	}
}

// TestNackPacing: a snapshot cache resends a rejected snapshot at once;
// the client paces its NACKs instead of spinning with the server.
func TestNackPacing(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	bad := limit("a", "edge", "remote_address", 1)
	bad.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	srv.set(t, "1", bad)
	var ups updates
	// The pause is the backoff's initial interval: 20ms here.
	run(t, srv.addr, xdsconfig.WithOnUpdate(ups.record))
	srv.answer(t, "1")
	window := 300 * time.Millisecond
	nacks := 0
	deadline := time.After(window)
	for done := false; !done; {
		select {
		case r := <-srv.reqs:
			if r.GetErrorDetail() != nil {
				nacks++
			}
		case <-deadline:
			done = true
		}
	}
	if max := int(window/(20*time.Millisecond)) + 2; nacks < 2 || nacks > max {
		t.Errorf("%d NACKs in %s, want 2..%d (paced, still answering)", nacks, window, max)
	}
	ups.mu.Lock()
	defer ups.mu.Unlock()
	if len(ups.errs) != 1 {
		t.Errorf("the repeated rejection was reported %d times, want once", len(ups.errs))
	}
}
