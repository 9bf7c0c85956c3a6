package lease_test

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// A refund of a leased counter goes to the backend, never to the lease,
// and what the replica knows of the counter follows it: the next hit
// answered from the block reports the room the refund gave back.
func TestRefundOfALeasedCounter(t *testing.T) {
	for _, lim := range leasing(windowLease, 1000, time.Minute) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			r := newRig(t)
			r.clock.Advance(time.Second)
			r.steady("k", lim, time.Millisecond, 200, r.sweep) // 200 hits: blocks of tens
			before, ok := r.local(hit("k", lim, 1))
			if !ok {
				t.Fatal("a warm counter answered by the backend")
			}
			counted := r.count("k", lim)
			refund := hit("k", lim, 100)
			refund.Mode = algorithms.NegativeHits
			res, local := r.local(refund)
			if local || !res[0].Allowed {
				t.Fatalf("refund: %+v (local %v), want allowed by the backend", res[0], local)
			}
			if got := r.count("k", lim); got != counted-100 {
				t.Errorf("the backend counts %d after a refund of 100, want %d", got, counted-100)
			}
			after, ok := r.local(hit("k", lim, 1))
			if !ok || after[0].Remaining != before[0].Remaining-1+100 {
				t.Errorf("the next local hit: %+v (local %v), want remaining %d", after[0], ok, before[0].Remaining-1+100)
			}
		})
	}
}
