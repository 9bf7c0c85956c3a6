package storetest

import (
	"math"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func testZeroRequests(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		zero, open := basic(a, 0), basic(a, 5)
		for _, at := range []time.Duration{0, time.Second, time.Hour, 400 * 24 * time.Hour} {
			h.at(at)
			got := h.take(req("open", open, 1), req("zero", zero, 1))
			if got[1].Allowed || got[1].RetryAfter != algorithms.Never {
				t.Errorf("%s: requests_per_unit 0 gave %s, want denied with retry never", at, fmtDecision(got[1]))
			}
			if check := h.take(req("open", open, 0))[0]; got[0] != check {
				t.Errorf("%s: open key in a batch denied by the zero limit reported %s, want the check %s", at, fmtDecision(got[0]), fmtDecision(check))
			}
		}
		if after := h.take(req("open", open, 0))[0]; after.Remaining != open.Capacity() {
			t.Errorf("batches denied by a zero limit consumed from the other key: %s", fmtDecision(after))
		}
	})
}

func testHitsOverCapacity(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		lim := basic(a, 5)
		h.at(4 * time.Second)
		for _, hits := range []uint64{lim.Capacity() + 1, 1000, algorithms.MaxCount, 1 << 53, 1 << 63, math.MaxUint64} {
			got := h.take(req("k", lim, hits))[0]
			if got.Allowed || got.RetryAfter != algorithms.Never {
				t.Errorf("%d hits on capacity %d: %s, want denied with retry never", hits, lim.Capacity(), fmtDecision(got))
			}
		}
		if after := h.take(req("k", lim, 0))[0]; after.Remaining != lim.Capacity() {
			t.Errorf("denied oversized hits consumed: check reports %s, want remaining %d", fmtDecision(after), lim.Capacity())
		}
		// Exactly the capacity still fits.
		if got := h.take(req("k", lim, lim.Capacity()))[0]; !got.Allowed || got.Remaining != 0 {
			t.Errorf("%d hits on a fresh key of capacity %d: %s, want allowed with remaining 0", lim.Capacity(), lim.Capacity(), fmtDecision(got))
		}
	})
}

// testInvalidLimit: a limit that fails Validate is denied for good, like
// algorithms.Take does, and never consumes from the rest of its batch. It
// is not a backend error: Envoy's failure mode must not decide it.
func testInvalidLimit(t *testing.T, newStore Factory) {
	h := newHarness(t, newStore)
	ok := basic(algorithms.FixedWindow, 5)
	invalid := map[string]algorithms.Limit{
		"unset algorithm":     {Requests: 5, Period: time.Second},
		"unknown algorithm":   {Algorithm: 99, Requests: 5, Period: time.Second},
		"zero period":         {Algorithm: algorithms.TokenBucket, Requests: 5},
		"sub-µs period":       {Algorithm: algorithms.GCRA, Requests: 5, Period: 1500 * time.Nanosecond},
		"requests too large":  {Algorithm: algorithms.SlidingLog, Requests: algorithms.MaxCount + 1, Period: time.Second},
		"debt on a window":    {Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Second, MaxDebt: 1},
		"burst on a window":   {Algorithm: algorithms.SlidingWindow, Requests: 5, Period: time.Second, Burst: 5},
		"refill over period":  {Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Second, RefillInterval: 2 * time.Second},
		"period beyond bound": {Algorithm: algorithms.SlidingWindow, Requests: 5, Period: algorithms.MaxPeriod + time.Second},
	}
	h.at(7 * time.Second)
	for name, lim := range invalid {
		if lim.Validate() == nil {
			t.Fatalf("%s: the limit is valid; fix the table", name)
		}
		got := h.take(req("ok", ok, 1), req("bad", lim, 1), req("bad", lim, 0))
		if got[1].Allowed || got[1].RetryAfter != algorithms.Never {
			t.Errorf("%s: %s, want denied with retry never", name, fmtDecision(got[1]))
		}
	}
	if got := h.take(req("ok", ok, 0))[0]; got.Remaining != 5 {
		t.Errorf("batches with an invalid limit consumed from the valid key: %s", fmtDecision(got))
	}
}

// testLimitChange: a rule edited between requests (lower or higher rate,
// another burst, another algorithm) meets the state the old rule left. Every
// store must read it exactly as the reference does; only the model's
// verdicts are checked, for every pair of algorithms.
func testLimitChange(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, from algorithms.Algorithm) {
		for i, to := range algorithms.All() {
			key := "change-to-" + to.String()
			base := time.Duration(i) * time.Minute
			h.at(base + 8*time.Second)
			h.take(req(key, basic(from, 10), 7))
			h.at(base + 9*time.Second)
			edits := []algorithms.Limit{
				basic(to, 3),
				basic(to, 20),
				{Algorithm: to, Requests: 10, Period: 3 * time.Second},
			}
			if to.Info().Bucket {
				edits = append(edits, algorithms.Limit{Algorithm: to, Requests: 10, Period: 10 * time.Second, Burst: 2})
			}
			for _, lim := range edits {
				h.take(req(key, lim, 0))
				h.take(req(key, lim, 1))
			}
		}
	})
}
