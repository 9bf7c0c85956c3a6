package storetest

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// RunSpread runs the spread case alone (Run includes it), for backends
// whose other cases run elsewhere (a Cluster, where it matters most).
func RunSpread(t *testing.T, newStore Factory) {
	t.Run("spread_denied", func(t *testing.T) { testSpreadDenied(t, newStore) })
}

// testSpreadDenied: denied batches whose keys carry different hash tags (on
// a Cluster, different slots: one take per slot group, each deciding its
// own ops) answer every op exactly as algorithms.TakeAll does, though some
// groups admitted their own ops: an allowed op reports a check on the
// state before the batch, not its group's charge; usage, shadow, quota
// (spread over groups), joined and spare ops and a key named twice in a
// group too. The harness compares every decision with the reference.
func testSpreadDenied(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		lim := basic(a, 10)
		op := func(key string, hits uint64, m algorithms.Mode) store.Request {
			return withMode(req(key, lim, hits), m)
		}
		h.at(time.Second)
		h.take(req("{sx}a", lim, 3))
		h.take(req("{sy}b", lim, 4))
		h.take(req("{sz}full", lim, 10))

		h.at(2 * time.Second)
		usage := op("{sx}u", 4, algorithms.Enforce)
		usage.Usage = true
		joined := op("{sw}q2", 1, algorithms.Quota)
		joined.Joined = true
		batch := reqs(
			op("{sx}a", 2, algorithms.Enforce),
			op("{sx}a", 1, algorithms.Enforce),
			usage,
			op("{sy}b", 8, algorithms.Shadow),
			op("{sy}c", 2, algorithms.Quota),
			op("{sw}q", 11, algorithms.Quota),
			joined,
			op("{sy}s", 3, algorithms.Spare),
			op("{sz}full", 5, algorithms.Enforce),
		)
		got := h.take(batch...)
		if !deniedAs(batch, got) || !got[0].Allowed || !got[4].Allowed || !got[7].Allowed {
			t.Fatalf("the full counter must deny the batch, with ops allowed on other keys: %v", got)
		}
		// What the denied batch left, key by key, against the reference's
		// (usage recorded, nothing else).
		var checks []store.Request
		for _, key := range []string{"{sx}a", "{sx}u", "{sy}b", "{sy}c", "{sw}q", "{sw}q2", "{sy}s", "{sz}full"} {
			checks = append(checks, req(key, lim, 0))
		}
		h.take(checks...)

		// Denied by its quota ops (in two groups, so each group runs them
		// as shadow ops and admits itself); usage after an enforced op on
		// one key reports what it records on the state without that op,
		// and the key keeps that usage alone (its group's undo takes back
		// the admission, no more: testExact holds every such case).
		h.at(3 * time.Second)
		usage = op("{sx}a", 2, algorithms.Enforce)
		usage.Usage = true
		batch = reqs(
			op("{sx}a", 1, algorithms.Enforce),
			usage,
			op("{sy}c", 1, algorithms.Enforce),
			op("{sw}q", 11, algorithms.Quota),
			op("{sz}full", 11, algorithms.Quota),
		)
		got = h.take(batch...)
		if !deniedAs(batch, got) || !got[0].Allowed || !got[2].Allowed {
			t.Fatalf("every quota op over its limit must deny the batch, with the enforced ops allowed: %v", got)
		}
		h.take(checks...)
	})
}

// deniedAs is the Verdict of reqs decided as ds.
func deniedAs(reqs []store.Request, ds []algorithms.Decision) bool {
	var v algorithms.Verdict
	for i, r := range reqs {
		v.Add(r.Mode, r.Joined, ds[i].Allowed)
	}
	return v.Denied()
}
