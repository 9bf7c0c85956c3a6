package storetest

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// basic is a limit of n requests per 10 s under a.
func basic(a algorithms.Algorithm, n uint64) algorithms.Limit {
	return algorithms.Limit{Algorithm: a, Requests: n, Period: 10 * time.Second}
}

// forEachAlgorithm runs fn as one subtest per algorithm, each on a fresh store.
func forEachAlgorithm(t *testing.T, newStore Factory, fn func(t *testing.T, h *harness, a algorithms.Algorithm)) {
	for _, a := range algorithms.All() {
		t.Run(a.String(), func(t *testing.T) {
			fn(t, newHarness(t, newStore), a)
		})
	}
}

func testAllOrNothing(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		la, lb := basic(a, 10), basic(a, 5)
		h.at(time.Second)
		h.take(req("a", la, 3))
		if d := h.take(req("b", lb, 5)); !d[0].Allowed {
			t.Fatalf("a fresh key of capacity 5 denied 5 hits: %s", fmtDecision(d[0]))
		}
		before := h.take(req("a", la, 0), req("b", lb, 0), req("c", la, 0))

		// The denied op sits in the middle, then first: position must not matter.
		for _, batch := range [][]int{{0, 1, 2}, {1, 0, 2}} {
			all := reqs(req("a", la, 2), req("b", lb, 1), req("c", la, 4))
			ordered := reqs(all[batch[0]], all[batch[1]], all[batch[2]])
			got := h.take(ordered...)
			for i, idx := range batch {
				switch {
				case idx == 1 && got[i].Allowed:
					t.Errorf("order %v: over-limit op was allowed: %s", batch, fmtDecision(got[i]))
				case idx != 1 && got[i] != before[idx]:
					// An admissible op of a denied batch reports what a check would.
					t.Errorf("order %v: op on %q reported %s, want the check %s", batch, ordered[i].Key, fmtDecision(got[i]), fmtDecision(before[idx]))
				}
			}
		}

		after := h.take(req("a", la, 0), req("b", lb, 0), req("c", la, 0))
		for i, key := range []string{"a", "b", "c"} {
			if after[i] != before[i] {
				t.Errorf("denied batches changed %q: before %s, after %s", key, fmtDecision(before[i]), fmtDecision(after[i]))
			}
		}
	})
}

func testSameKeyTwice(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		lim := basic(a, 10)
		h.at(2 * time.Second)
		got := h.take(req("twice", lim, 1), req("twice", lim, 1))
		if !got[0].Allowed || !got[1].Allowed {
			t.Fatalf("two single hits on a fresh key of capacity 10: %s, %s", fmtDecision(got[0]), fmtDecision(got[1]))
		}
		if got[1].Remaining >= got[0].Remaining {
			t.Errorf("second op in the batch saw remaining %d, want less than the first's %d", got[1].Remaining, got[0].Remaining)
		}
		h.take(req("once", lim, 2))
		checks := h.take(req("twice", lim, 0), req("once", lim, 0))
		if checks[0] != checks[1] {
			t.Errorf("key hit 1+1 in one batch: %s; key hit 2 once: %s; want equal", fmtDecision(checks[0]), fmtDecision(checks[1]))
		}

		// 6+6 exceeds 10 only because both ops land on one key: the whole
		// batch is denied and the first 6 are not kept either.
		got = h.take(req("twice", lim, 6), req("twice", lim, 6))
		if got[1].Allowed {
			t.Errorf("6+6 hits on a key with 8 left: second op allowed: %s", fmtDecision(got[1]))
		}
		if after := h.take(req("twice", lim, 0)); after[0] != checks[0] {
			t.Errorf("denied 6+6 batch changed the key: before %s, after %s", fmtDecision(checks[0]), fmtDecision(after[0]))
		}
	})
}

func testCheckOnly(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		lim := basic(a, 5)
		h.at(3 * time.Second)
		fresh := h.take(req("k", lim, 0))[0]
		if !fresh.Allowed || fresh.Remaining != lim.Capacity() {
			t.Errorf("check on a fresh key: %s, want allowed with remaining %d", fmtDecision(fresh), lim.Capacity())
		}
		for i := range 3 {
			if again := h.take(req("k", lim, 0))[0]; again != fresh {
				t.Errorf("check %d changed the answer: %s, first %s", i+2, fmtDecision(again), fmtDecision(fresh))
			}
		}
		h.take(req("k", lim, 3))
		used := h.take(req("k", lim, 0))[0]
		if used.Remaining >= fresh.Remaining {
			t.Errorf("after 3 hits a check reports remaining %d, not below the fresh %d", used.Remaining, fresh.Remaining)
		}
		for i := range 3 {
			if again := h.take(req("k", lim, 0))[0]; again != used {
				t.Errorf("check %d after hits changed the answer: %s, first %s", i+2, fmtDecision(again), fmtDecision(used))
			}
		}
	})
}

func testEmptyBatch(t *testing.T, newStore Factory) {
	h := newHarness(t, newStore)
	res, err := h.s.Take(t.Context(), nil)
	if err != nil {
		t.Fatalf("Take(no requests): %v", err)
	}
	if len(res) != 0 {
		t.Fatalf("Take(no requests) returned %d results", len(res))
	}
}
