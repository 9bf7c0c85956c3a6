package config

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// The loader refuses lease: true on the limits lease.Leasable
// refuses (the rule the lease decorator follows), and names for each the
// field that prevents it: the generic refusal is only for an algorithm
// added to the registry without a reason here.
func TestLeaseRefusalNamesWhy(t *testing.T) {
	for _, alg := range append(algorithms.All(), 0, 200) {
		for _, requests := range []uint64{0, 1, 10} {
			for _, refill := range []time.Duration{0, 100 * time.Millisecond} {
				for _, debt := range []uint64{0, 3} {
					for _, burst := range []uint64{0, 20} {
						lim := algorithms.Limit{Algorithm: alg, Requests: requests, Period: time.Second,
							RefillInterval: refill, MaxDebt: debt, Burst: burst}
						refused := leaseRefusal(lim)
						if refused != nil && refused.reason == lim.Algorithm.String()+" cannot lease" {
							t.Errorf("%+v: refused without saying why: %q", lim, refused.reason)
						}
					}
				}
			}
		}
	}
}
