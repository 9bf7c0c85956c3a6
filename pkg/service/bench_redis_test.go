package service_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/stack"
)

// BenchmarkServiceOnRedis is the daemon's decision path without gRPC: the
// service with its metrics over pkg/store/stack on a real Redis, 50 callers
// as in rlbench's default scenario (fixed_window 1000/s over 4096 values per
// descriptor), so that the coalescer batches as under that load. cpu-ns/op
// is this process's CPU per decision (Redis's is another process's), the
// figure rlbench compares with a bare gRPC server; scripts/op the script
// calls Redis ran per decision.
func BenchmarkServiceOnRedis(b *testing.B) {
	srv := redistest.Start(b)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	rules, err := service.ParseRules(service.RulesFile{Name: "bench.yaml", YAML: []byte(`
domain: bench
descriptors:
  - key: fixed_window
    rate_limit: {unit: second, requests_per_unit: 1000}
`)})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			stk, err := stack.New(stack.WithRedis(redisstore.WithAddr(srv.Addr)))
			if err != nil {
				b.Fatal(err)
			}
			defer stk.Close()
			svc, err := service.New(rules, stk.Store, service.WithMetrics(prometheus.NewRegistry()))
			if err != nil {
				b.Fatal(err)
			}
			runParallelDecisions(b, svc, n, admin)
		})
	}
}

// runParallelDecisions calls svc from 50 goroutines, each request of n
// descriptors on the next values, and reports CPU and script calls per
// decision.
func runParallelDecisions(b *testing.B, svc *service.Service, n int, admin *redis.Client) {
	var next atomic.Uint64
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((50 + procs - 1) / procs)
	b.ReportAllocs()
	scripts0 := scriptCalls(b, admin)
	cpu0 := processCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := benchRequest(n)
		var dl deadlines
		defer dl.stop()
		for pb.Next() {
			i := next.Add(1)
			for d, desc := range req.Descriptors {
				desc.Entries[0].Value = benchValues[(i*uint64(n)+uint64(d))%uint64(len(benchValues))]
			}
			if _, err := svc.ShouldRateLimit(dl.context(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(scriptCalls(b, admin)-scripts0)/float64(b.N), "scripts/op")
}

// deadlines gives a caller's calls a deadline, as gRPC gives each call
// (rlbench's is 1 s), renewed long before it nears REDIS_TIMEOUT's cap: a
// context of its own per call would count allocations gRPC makes, not the
// service.
type deadlines struct {
	ctx    context.Context
	cancel context.CancelFunc
	renew  time.Time
	calls  int
}

func (d *deadlines) context() context.Context {
	d.calls++
	if d.ctx == nil || (d.calls%64 == 0 && time.Now().After(d.renew)) {
		d.stop()
		d.ctx, d.cancel = context.WithTimeout(context.Background(), 5*time.Second)
		d.renew = time.Now().Add(4 * time.Second)
	}
	return d.ctx
}

func (d *deadlines) stop() {
	if d.cancel != nil {
		d.cancel()
	}
}

// processCPU is this process's user and system time in ns: the service's
// CPU, without Redis's.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func scriptCalls(b *testing.B, c *redis.Client) int64 {
	stats := redistest.CommandStats(b, c)
	return stats["fcall"].Calls + stats["evalsha"].Calls
}

// benchValues are made once, so the loop allocates only what a decision does.
var benchValues = func() []string {
	v := make([]string, 4096)
	for i := range v {
		v[i] = strconv.Itoa(i)
	}
	return v
}()

func benchRequest(n int) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: "bench"}
	for range n {
		req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "fixed_window"}},
		})
	}
	return req
}
