package leasetest

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Replicas is how many lease stores share the backend.
const Replicas = 3

// An Option scales the property down from its defaults: 4 "sound" runs
// per algorithm and 20 periods per run. The Redis runs use fewer and
// shorter ones, each step there being a round trip under the race
// detector; memstore's run keeps the defaults.
type Option func(*scale)

type scale struct {
	seeds   uint64
	periods int
}

// Seeds sets how many random runs "sound" makes per algorithm.
func Seeds(n int) Option { return func(s *scale) { s.seeds = uint64(max(n, 1)) } }

// Periods sets how many of the limit's periods each run lasts (at least 4:
// the crash comes after half of a "sound" run, and "load" checks every
// window).
func Periods(n int) Option { return func(s *scale) { s.periods = max(n, 4) } }

// Limits are the leasable limits the property runs over, one per
// algorithm the registry says leases (algorithms.Info), so that
// a new one is covered as soon as its row says it leases. Windows get 500
// a second; buckets take turns over the bucket shapes: a burst below the
// rate, none, and a burst above a rate whose emission interval (1s/700)
// is not a whole number of µs.
func Limits() []algorithms.Limit {
	bucketShapes := []algorithms.Limit{
		{Requests: 500, Period: time.Second, Burst: 250},
		{Requests: 500, Period: time.Second},
		{Requests: 700, Period: time.Second, Burst: 900},
	}
	var out []algorithms.Limit
	buckets := 0
	for _, a := range algorithms.All() {
		lim := algorithms.Limit{Requests: 500, Period: time.Second}
		switch info := a.Info(); {
		case !info.WindowLease && !info.BucketLease:
			continue
		case info.BucketLease:
			lim = bucketShapes[buckets%len(bucketShapes)]
			buckets++
		}
		lim.Algorithm = a
		out = append(out, lim)
	}
	return out
}

// Other is lim with another rate, for the second counter of a batch.
func Other(lim algorithms.Limit) algorithms.Limit {
	lim.Requests = lim.Requests * 3 / 5
	if lim.Burst != 0 {
		lim.Burst = lim.Burst * 3 / 5
	}
	return lim
}
