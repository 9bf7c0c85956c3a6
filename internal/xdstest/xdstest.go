// Package xdstest runs go-control-plane's own ADS server for tests of the
// xDS config source. It is apart from internal/testkit so that test suites
// without xDS (pkg/queue/queuetest) do not import go-control-plane's server.
package xdstest

import (
	"context"
	"net"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
)

// Server runs go-control-plane's ADS server over a snapshot cache on a
// port of 127.0.0.1 the kernel picks, as Envoy Gateway and Envoy AI
// Gateway serve rate limit configs; it stops with the test.
func Server(t testing.TB) (string, cachev3.SnapshotCache) {
	t.Helper()
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(context.Background(), cache, nil))
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String(), cache
}

// SetRateLimitConfigs makes configs, as version, what cache serves node.
func SetRateLimitConfigs(t testing.TB, cache cachev3.SnapshotCache, node, version string, configs ...*rlsconfv3.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, len(configs))
	for i, c := range configs {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}
