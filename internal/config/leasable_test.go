package config_test

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// TestLeasableAgreesWithTheDecorator: the loader refuses lease: true on
// exactly the limits the lease decorator would not lease, so a rule never
// says lease: true and silently goes per decision.
func TestLeasableAgreesWithTheDecorator(t *testing.T) {
	for _, alg := range append(algorithms.All(), 0, 200) {
		for _, requests := range []uint64{0, 1, 10} {
			for _, refill := range []time.Duration{0, 100 * time.Millisecond} {
				for _, debt := range []uint64{0, 3} {
					for _, burst := range []uint64{0, 20} {
						lim := algorithms.Limit{Algorithm: alg, Requests: requests, Period: time.Second,
							RefillInterval: refill, MaxDebt: debt, Burst: burst}
						if got, want := config.Leasable(lim), lease.Leasable(lim); got != want {
							t.Errorf("config.Leasable(%+v) = %v, lease.Leasable = %v", lim, got, want)
						}
					}
				}
			}
		}
	}
}
