package ratelimit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// BenchmarkShouldRateLimit measures the service's own overhead (validation,
// matching, keys, response) over the embedded store, on a limit that is
// never reached.
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg := parse(b, `
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 4294967295}
`)
	for _, n := range []int{1, 3, 8} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			st := memstore.New()
			defer st.Close()
			svc := ratelimit.New(staticConfig{cfg}, st)
			req := request("bench")
			for i := range n {
				req.Descriptors = append(req.Descriptors, desc("user", fmt.Sprint(i)))
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := svc.ShouldRateLimit(ctx, req)
				if err != nil || resp.GetOverallCode() != OK {
					b.Fatalf("ShouldRateLimit = %v, %v", resp, err)
				}
			}
		})
	}
}
