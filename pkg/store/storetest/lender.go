package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// RunLender runs the lender case alone (Run includes it), for backends
// whose other cases run elsewhere (a Cluster).
func RunLender(t *testing.T, newStore Factory) {
	t.Run("lender", func(t *testing.T) { testLender(t, newStore) })
}

// takeCharged is take for a store.Lender, also comparing the charges with
// the reference's (algorithms.Batch's over the model): the same keys,
// limits, amounts and written state, so that a lease gives back the same
// thing on either store.
func (h *harness) takeCharged(l store.Lender, reqs ...store.Request) ([]algorithms.Decision, []store.Charge) {
	h.t.Helper()
	now := h.clock.Now()
	res, charges, err := l.TakeCharged(h.t.Context(), reqs)
	if err != nil {
		h.t.Fatalf("%s: TakeCharged(%d requests): %v", now.Sub(Epoch()), len(reqs), err)
	}
	if len(res) != len(reqs) {
		h.t.Fatalf("%s: TakeCharged(%d requests) returned %d results", now.Sub(Epoch()), len(reqs), len(res))
	}
	want := h.model.take(reqs, now)
	h.compare(reqs, res, want)
	if len(charges) != len(want.Charges) {
		h.t.Fatalf("%s: charges %+v, reference %+v", now.Sub(Epoch()), charges, want.Charges)
	}
	for i, c := range charges {
		w := want.Charges[i]
		if c.Key != w.Key || c.Limit != w.Limit || c.Applied != w.Applied || !sameState(c.After, w.After) {
			h.t.Errorf("%s: charge %d = %+v, reference %+v", now.Sub(Epoch()), i, c, w)
		}
	}
	return decisionsOf(res), charges
}

// giveBack runs Return on the store and algorithms.Undo on the model.
func (h *harness) giveBack(l store.Lender, charges ...store.Charge) {
	h.t.Helper()
	if err := l.Return(h.t.Context(), charges); err != nil {
		h.t.Fatalf("%s: Return(%d charges): %v", h.clock.Now().Sub(Epoch()), len(charges), err)
	}
	for _, c := range charges {
		if st, ok := h.model.states[c.Key]; ok {
			h.model.states[c.Key] = algorithms.Undo(st, c, h.clock.Now())
		}
	}
}

func sameState(a, b algorithms.State) bool {
	// Every view names the same three registers: Window's compares them all.
	return algorithms.ViewOf[algorithms.Window](a) == algorithms.ViewOf[algorithms.Window](b) &&
		a.ExpiresAt == b.ExpiresAt && slices.Equal(a.Log, b.Log)
}

// part is what a lease that leaves hits of its block unused gives back of
// charge c: those hits for registers; for sliding_log, whose undo removes whole
// entries, the entries of the block (the Spare op's, the newest).
func part(c store.Charge, hits uint64) store.Charge {
	c.Applied = hits
	if len(c.After.Log) > 0 {
		c.After.Log = c.After.Log[len(c.After.Log)-1:]
		c.Applied = uint64(c.After.Log[0].Hits)
	}
	return c
}

// testLender: a lease's block of b hits rides as a Spare op behind a
// request's own op and is charged with it (both keys of a request, in
// separate Cluster slots, report their charges); returning part of it
// moves a window's remaining back by exactly those hits, and never gives a
// bucket more room than it would have had without the charge, now or after
// it refilled; a window that ended has nothing to give back; a denied
// batch reports no charge. Every decision and charge is compared with the
// reference.
func testLender(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		l, ok := h.s.(store.Lender)
		if !ok {
			t.Skipf("%T is not a store.Lender", h.s)
		}
		lim := basic(a, 20)
		if a.Info().Bucket {
			lim.Burst = 20
		}
		// Hash tags put the keys in different Cluster slots.
		const key, other = "{lend:a}", "{lend:b}"
		const block, give = 8, 5
		remaining := func(k string) uint64 {
			t.Helper()
			return h.take(req(k, lim, 0))[0].Remaining
		}
		h.at(time.Second)
		h.take(req(key, lim, 2))
		// The room a never-charged key would have, at any later time: a copy
		// of the reference state before the block.
		never := h.model.states[key]
		roomWithout := func() uint64 {
			d, _ := algorithms.Take(lim, never, 0, h.clock.Now())
			return d.Remaining
		}

		ds, charges := h.takeCharged(l, req(key, lim, 1), withMode(req(key, lim, block), algorithms.Spare), req(other, lim, 1))
		allowedAre(t, "request + block on one key, request on another", ds, true, true, true)
		if len(charges) != 2 || charges[0].Key != key || charges[1].Key != other {
			t.Fatalf("charges %+v, want one for %s then one for %s", charges, key, other)
		}
		if charges[0].Applied != 1+block {
			t.Errorf("%s charged %d hits, want %d", key, charges[0].Applied, 1+block)
		}

		h.clock.Advance(100 * time.Millisecond)
		before := remaining(key)
		back := part(charges[0], give)
		// Both keys in one Return (on a Cluster, two slots: two calls);
		// the reference checks other's room back.
		h.giveBack(l, back, charges[1])
		remaining(other)
		after := remaining(key)
		if a.Info().Bucket {
			if after < before || after > roomWithout() {
				t.Errorf("bucket after returning %d hits: remaining %d -> %d, want within [%d, %d] (never beyond the room without the charge)",
					back.Applied, before, after, before, roomWithout())
			}
		} else if after != before+back.Applied {
			t.Errorf("window after returning %d hits: remaining %d -> %d, want %d", back.Applied, before, after, before+back.Applied)
		}

		// Much later: a window has rolled over (nothing left to return), a
		// bucket refilled (it forgot the charge); a return changes nothing.
		h.clock.Advance(3 * lim.Period)
		before = remaining(key)
		h.giveBack(l, charges[0])
		if after := remaining(key); after != before || after > roomWithout() {
			t.Errorf("returning after %s: remaining %d -> %d, want unchanged, within %d", 3*lim.Period, before, after, roomWithout())
		}

		// A denied batch charged nothing, so it reports nothing to return;
		// nor does a batch whose block did not fit. (One key: a denied
		// cross-slot batch on a Cluster reports its allowed ops as its slot
		// group decided them, not as the reference's checks.)
		if _, ch := h.takeCharged(l, withMode(req(key, lim, 2), algorithms.Spare), req(key, lim, 21)); len(ch) != 0 {
			t.Errorf("denied batch reported charges %+v", ch)
		}
		ds, ch := h.takeCharged(l, withMode(req(other, lim, 21), algorithms.Spare))
		allowedAre(t, "a block larger than the limit", ds, false)
		if len(ch) != 0 {
			t.Errorf("a block that did not fit reported charges %+v", ch)
		}
		if err := l.Return(h.t.Context(), nil); err != nil {
			t.Errorf("Return(nil): %v", err)
		}
	})
}
