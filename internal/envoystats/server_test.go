package envoystats

import (
	"context"
	"net"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// BenchmarkInterceptor is the per-call cost of envoyproxy's server stats
// (ratelimit_server.<Method>.total_requests and .response_time) with both
// sinks on: Prometheus and statsd over UDP.
func BenchmarkInterceptor(b *testing.B) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	statsd, err := NewStatsd("127.0.0.1", conn.LocalAddr().(*net.UDPAddr).Port, "udp", zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	prom, err := NewPrometheus("", false)
	if err != nil {
		b.Fatal(err)
	}
	s := New(Fanout(prom, statsd))
	defer s.Close()
	call := s.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = call(ctx, nil, info, handler)
		}
	})
}
