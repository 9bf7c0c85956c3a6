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
// sinks on, Prometheus and statsd over UDP, the sending of the times
// included.
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
	call := s.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		// Drain as the flush goroutine would, often enough that no time
		// is dropped: a benchmark calls far faster than a service decides.
		for i := 0; pb.Next(); i++ {
			_, _ = call(ctx, nil, info, handler)
			if i%256 == 255 {
				s.flushTimers()
			}
		}
	})
	s.Close()
	if d := s.timers.dropped.Load(); d > 0 {
		b.Fatalf("%d of %d times dropped", d, b.N)
	}
}

// TestTimerLog: every call's time reaches its timer at the next flush, and
// a buffer that the flush does not drain in time drops what it cannot hold.
func TestTimerLog(t *testing.T) {
	rec := newRecorder()
	s := New(rec)
	call := s.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Do"}
	for range 1000 {
		if _, err := call(context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(rec.timers["ratelimit_server.Do.response_time"]); n != 0 {
		t.Fatalf("%d times sent before a flush", n)
	}
	s.Flush()
	if n := len(rec.timers["ratelimit_server.Do.response_time"]); n != 1000 {
		t.Fatalf("%d times sent by the flush, want 1000", n)
	}
	if got := rec.snapshot()["ratelimit_server.Do.total_requests"]; got != 1000 {
		t.Fatalf("total_requests = %d, want 1000", got)
	}

	l := newTimerLog()
	m := s.method("/pkg.Svc/Do")
	for range (len(l.shards) + 1) * shardHard {
		l.add(m, 1)
	}
	if d := l.dropped.Load(); d < shardHard {
		t.Fatalf("dropped %d of %d values past the buffers' room", d, (len(l.shards)+1)*shardHard)
	}
	select {
	case <-l.wake:
	default:
		t.Fatal("a full buffer did not ask for a flush")
	}
}
