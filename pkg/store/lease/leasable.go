package lease

import "github.com/ratelimitd/ratelimitd/pkg/algorithms"

// Leasable reports whether replicas may lease blocks of a counter under lim
// ("Leases" in docs/algorithms.md): a valid limit of some Requests whose
// algorithm leases (algorithms.Info), and for a stepped algorithm no
// RefillInterval or MaxDebt. Windows lease hits of the window they were
// charged in; continuous buckets lease emission slots reserved ahead.
// sliding_log does not: each entry's time is its admission time, and a hit
// admitted later from a block would leave the log early. A stepped or
// indebted token bucket is not the continuous bucket the slots assume.
// Nor does a window of calendar months whose ResetAfter lags (ResetLag,
// sliding_window): a replica finds its window's end ResetLag periods
// before ResetAfter, and a calendar month is not one Period long.
func Leasable(lim algorithms.Limit) bool {
	info := lim.Algorithm.Info()
	return (info.WindowLease || info.BucketLease) && lim.Requests > 0 && lim.RefillInterval == 0 && lim.MaxDebt == 0 &&
		(!lim.Calendar || info.ResetLag == 0) && lim.Validate() == nil
}
