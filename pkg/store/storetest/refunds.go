package storetest

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// RunModes runs the cases of docs/tokens.md's "Usage and admissions", the modes
// and the refunds, alone (Run includes them), for backends whose other
// cases run elsewhere (a Cluster, where the keys of a batch fall in
// different slots).
func RunModes(t *testing.T, newStore Factory) {
	t.Run("modes", func(t *testing.T) { testModes(t, newStore) })
	t.Run("refunds", func(t *testing.T) { testRefunds(t, newStore) })
}

func (p modeProbe) refund(key string, hits uint64) store.Request {
	return p.op(key, hits, algorithms.NegativeHits)
}

// testRefunds: refunds (algorithms.NegativeHits, Envoy's is_negative_hits)
// give back exactly what the algorithm's rule says, never below a fresh
// key, are never denied, are kept whatever the request's verdict, and come
// before the request's usage and admissions, which are judged on the
// refunded counters (docs/tokens.md's "Usage and admissions"). Every decision is
// also compared with algorithms.TakeAll's by the harness.
func testRefunds(t *testing.T, newStore Factory) { runModeCases(t, newStore, refundCases) }

var refundCases = []modeCase{{
	// At one instant every algorithm gives back exactly what it took:
	// a count, tokens, a level, emission intervals or log entries.
	name: "refund_gives_back_what_it_says",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		p.h.take(p.op("room", 6, enforce))
		got := p.h.take(p.refund("room", 4))
		allowedAre(t, "refund", got, true)
		if got[0].Remaining != before["room"]-2 {
			t.Errorf("refund of 4 after 6: %s, want remaining %d", fmtDecision(got[0]), before["room"]-2)
		}
		charged(t, before, p.remaining(), map[string]uint64{"room": 2})
	},
}, {
	name: "refund_never_below_fresh",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		p.h.take(p.op("room", 3, enforce))
		allowedAre(t, "refund of more than was taken", p.h.take(p.refund("room", 50)), true)
		charged(t, before, p.remaining(), nil)
		// A fresh key's room, and not a hit more.
		allowedAre(t, "capacity+1 after the refund", p.h.take(p.op("room", 11, enforce)), false)
		allowedAre(t, "capacity after the refund", p.h.take(p.op("room", 10, enforce)), true)
		allowedAre(t, "a refund of a fresh key", p.h.take(p.refund("enforced", 5)), true)
		charged(t, before, p.remaining(), map[string]uint64{"room": 10})
	},
}, {
	name: "a_following_request_is_admitted_then_denied",
	run: func(t *testing.T, p modeProbe) {
		allowedAre(t, "fill small", p.h.take(p.op("small", 1, enforce)), true)
		allowedAre(t, "small full", p.h.take(p.op("small", 1, enforce)), false)
		p.h.take(p.refund("small", 1))
		allowedAre(t, "small after a refund", p.h.take(p.op("small", 1, enforce)), true)
		allowedAre(t, "small full again", p.h.take(p.op("small", 1, enforce)), false)
	},
}, {
	name: "refund_is_never_denied",
	run: func(t *testing.T, p modeProbe) {
		p.h.take(p.usage("small", 3)) // past its limit
		batch := reqs(p.refund("small", 1), p.refund("q1", 1))
		got := p.h.take(batch...)
		allowedAre(t, "refunds of a key past its limit and of a fresh one", got, true, true)
		if deniedAs(batch, got) {
			t.Errorf("a batch of refunds is denied: %v", got)
		}
	},
}, {
	name: "refund_is_kept_in_a_denied_request",
	run: func(t *testing.T, p modeProbe) {
		p.h.take(p.op("room", 5, enforce))
		before := p.remaining()
		got := p.h.take(p.refund("room", 3), p.op("enforced", 1, enforce), p.op("small", 2, enforce))
		allowedAre(t, "refund, admission, admission over its limit", got, true, true, false)
		netCharged(t, before, p.remaining(), map[string]int64{"room": -3})
	},
}, {
	name: "admission_is_judged_after_the_refund",
	run: func(t *testing.T, p modeProbe) {
		p.h.take(p.op("small", 1, enforce))
		before := p.remaining()
		// The admission comes first in the request, the refund after
		// it: the refund still comes first.
		got := p.h.take(p.op("small", 1, enforce), p.refund("small", 1))
		allowedAre(t, "admission on a full key beside its refund", got, true, true)
		charged(t, before, p.remaining(), nil)
	},
}, {
	name: "usage_refund_and_admission_in_one_request",
	run: func(t *testing.T, p modeProbe) {
		p.h.take(p.op("room", 5, enforce))
		before := p.remaining()
		got := p.h.take(p.usage("room", 4), p.op("enforced", 2, enforce), p.refund("room", 2), p.op("room", 3, enforce))
		allowedAre(t, "usage, admission, refund, admission", got, true, true, true, true)
		netCharged(t, before, p.remaining(), map[string]int64{"room": 4 - 2 + 3, "enforced": 2})
	},
}}

// netCharged is charged where a refund may have given room back: want
// holds the room each key lost (negative: gained) between before and
// after.
func netCharged(t *testing.T, before, after map[string]uint64, want map[string]int64) {
	t.Helper()
	for _, k := range modeKeys {
		if got := int64(before[k]) - int64(after[k]); got != want[k] {
			t.Errorf("key %q: remaining %d -> %d, charged %d, want %d", k, before[k], after[k], got, want[k])
		}
	}
}
