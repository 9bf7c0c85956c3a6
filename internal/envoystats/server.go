package envoystats

import (
	"context"
	"time"

	gostats "github.com/lyft/gostats"
	"google.golang.org/grpc"
)

// method is one gRPC method's stats: ratelimit_server.<Method>.total_requests
// and .response_time (a timer in milliseconds).
type method struct {
	total        gostats.Counter
	responseTime gostats.Timer
}

func (s *Stats) method(full string) *method {
	if m, ok := s.methods.Load(full); ok {
		return m.(*method)
	}
	name := methodName(full)
	m := &method{total: s.server.NewCounter(name + ".total_requests"), responseTime: s.server.NewTimer(name + ".response_time")}
	actual, _ := s.methods.LoadOrStore(full, m)
	return actual.(*method)
}

// UnaryServerInterceptor counts every unary call and times it, per method,
// as envoyproxy's server reporter does. Times are fractional milliseconds
// (envoyproxy truncates them to whole milliseconds, so that a sub-millisecond
// call reads 0), sent at the next flush (see timerLog).
func (s *Stats) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		m := s.method(info.FullMethod)
		m.total.Inc()
		start := time.Now()
		resp, err := handler(ctx, req)
		s.timers.add(m, float64(time.Since(start))/float64(time.Millisecond))
		return resp, err
	}
}
