package storetest

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

func withMode(r store.Request, m algorithms.Mode) store.Request {
	r.Mode = m
	return r
}

// modeKeys are the keys every modes case uses, with their limits: "small"
// admits 1 hit, the others 10.
var modeKeys = []string{"enforced", "small", "room", "q1", "q2"}

// modeProbe checks every key of the modes cases without charging anything,
// so a case can tell exactly which keys a batch charged.
type modeProbe struct {
	h *harness
	a algorithms.Algorithm
}

func (p modeProbe) limit(key string) algorithms.Limit {
	if key == "small" || key == "q1" {
		return basic(p.a, 1)
	}
	return basic(p.a, 10)
}

func (p modeProbe) op(key string, hits uint64, m algorithms.Mode) store.Request {
	return withMode(req(key, p.limit(key), hits), m)
}

// joined is op, as one more limit of the descriptor of the op before it.
func (p modeProbe) joined(key string, hits uint64, m algorithms.Mode) store.Request {
	r := p.op(key, hits, m)
	r.Joined = true
	return r
}

func (p modeProbe) usage(key string, hits uint64) store.Request {
	r := p.op(key, hits, algorithms.Enforce)
	r.Usage = true
	return r
}

func (p modeProbe) remaining() map[string]uint64 {
	p.h.t.Helper()
	checks := make([]store.Request, len(modeKeys))
	for i, k := range modeKeys {
		checks[i] = req(k, p.limit(k), 0)
	}
	got := p.h.take(checks...)
	out := make(map[string]uint64, len(modeKeys))
	for i, k := range modeKeys {
		out[k] = got[i].Remaining
	}
	return out
}

// charged fails t unless the keys lost exactly want hits of room between
// before and after (keys not in want: none).
func charged(t *testing.T, before, after map[string]uint64, want map[string]uint64) {
	t.Helper()
	for _, k := range modeKeys {
		if got := int64(before[k]) - int64(after[k]); got != int64(want[k]) {
			t.Errorf("key %q: remaining %d -> %d, charged %d, want %d", k, before[k], after[k], got, want[k])
		}
	}
}

func allowedAre(t *testing.T, what string, got []algorithms.Decision, want ...bool) {
	t.Helper()
	for i := range want {
		if got[i].Allowed != want[i] {
			t.Errorf("%s: op %d is %s, want allowed=%v", what, i, fmtDecision(got[i]), want[i])
		}
	}
}

const (
	enforce = algorithms.Enforce
	shadow  = algorithms.Shadow
	quota   = algorithms.Quota
	spare   = algorithms.Spare
)

// testModes: Shadow and Quota ops ride in the same single round trip as the
// others without letting a rule that must not deny the request veto them,
// and are counted past their limits when the request is admitted; Spare ops
// (lease top-ups) never deny and are charged only when they fit; usage is
// recorded whatever the verdict; admissions stay all-or-nothing.
func testModes(t *testing.T, newStore Factory) { runModeCases(t, newStore, modeCases) }

// modeCase is a batch (or a few) on the modes keys of a fresh store, for
// every algorithm.
type modeCase struct {
	name string
	run  func(t *testing.T, p modeProbe)
}

func runModeCases(t *testing.T, newStore Factory, cases []modeCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
				h.at(time.Second)
				c.run(t, modeProbe{h: h, a: a})
			})
		})
	}
}

var modeCases = []modeCase{{
	name: "shadow_over_limit_does_not_deny",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("enforced", 2, enforce), p.op("small", 2, shadow))
		allowedAre(t, "enforced beside an over-limit shadow op", got, true, false)
		// The shadow op is counted as usual: past its limit.
		charged(t, before, p.remaining(), map[string]uint64{"enforced": 2, "small": 1})
	},
}, {
	name: "shadow_allowed_is_charged",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("enforced", 1, enforce), p.op("room", 3, shadow))
		allowedAre(t, "shadow op with room", got, true, true)
		charged(t, before, p.remaining(), map[string]uint64{"enforced": 1, "room": 3})
	},
}, {
	name: "shadow_only_batch",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("small", 2, shadow), p.op("room", 4, shadow))
		allowedAre(t, "shadow ops only, one over", got, false, true)
		charged(t, before, p.remaining(), map[string]uint64{"room": 4, "small": 1})
	},
}, {
	name: "denied_batch_writes_no_shadow_op",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("room", 1, shadow), p.op("enforced", 100, enforce))
		if got[1].Allowed {
			t.Fatalf("enforced op of 100 hits over a limit of 10: %s, want denied", fmtDecision(got[1]))
		}
		charged(t, before, p.remaining(), nil)
	},
}, {
	name: "shadow_and_enforced_on_one_key",
	run: func(t *testing.T, p modeProbe) {
		// The shadow op counts past the limit, so the enforced op after
		// it on the same key is judged on that running total (as
		// envoyproxy judges it) and denies the request: nothing charged.
		before := p.remaining()
		got := p.h.take(p.op("enforced", 11, shadow), p.op("enforced", 4, enforce))
		allowedAre(t, "over-limit shadow op then enforced op, one key", got, false, false)
		charged(t, before, p.remaining(), nil)
	},
}, {
	name: "quota_op_with_room_carries_the_batch",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("q1", 2, quota), p.op("q2", 2, quota), p.op("enforced", 1, enforce))
		allowedAre(t, "quota ops (over, room) + enforced", got, false, true, true)
		// The admitted request counts its over-limit quota op too.
		charged(t, before, p.remaining(), map[string]uint64{"q1": 1, "q2": 2, "enforced": 1})
	},
}, {
	name: "every_quota_op_over_denies_the_batch",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("q1", 2, quota), p.op("q2", 11, quota), p.op("enforced", 1, enforce), p.op("room", 1, shadow))
		allowedAre(t, "quota ops both over", got, false, false)
		charged(t, before, p.remaining(), nil)
	},
}, {
	// A quota descriptor with two limits (q2, then q1 joined to it) is
	// one alternative, over when either limit is: room left on q2 does
	// not carry the batch.
	name: "joined_quota_limit_over_denies_its_alternative",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("q2", 2, quota), p.joined("q1", 2, quota), p.op("enforced", 1, enforce))
		allowedAre(t, "quota descriptor (room, over) + enforced", got, true, false, true)
		charged(t, before, p.remaining(), nil)
	},
}, {
	name: "joined_quota_alternative_beside_one_with_room",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("q2", 2, quota), p.joined("q1", 2, quota), p.op("room", 3, quota))
		allowedAre(t, "quota descriptor (room, over) + quota with room", got, true, false, true)
		// Admitted: every quota op counts, past its limit too.
		charged(t, before, p.remaining(), map[string]uint64{"q2": 2, "q1": 1, "room": 3})
	},
}, {
	name: "joined_enforced_limits_all_or_nothing",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("room", 1, enforce), p.joined("small", 2, enforce))
		allowedAre(t, "enforced descriptor (room, over)", got, true, false)
		charged(t, before, p.remaining(), nil)
	},
}, {
	name: "enforced_denial_beats_quota_room",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("q2", 1, quota), p.op("small", 2, enforce))
		if got[1].Allowed {
			t.Fatalf("enforced op over its limit: %s, want denied", fmtDecision(got[1]))
		}
		charged(t, before, p.remaining(), nil)
	},
}, {
	// Spare: a lease top-up riding on a request, taken only if it fits.
	name: "spare_with_room_is_charged_in_an_admitted_batch",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("enforced", 1, enforce), p.op("room", 4, spare))
		allowedAre(t, "enforced + spare with room", got, true, true)
		charged(t, before, p.remaining(), map[string]uint64{"enforced": 1, "room": 4})
	},
}, {
	name: "spare_over_limit_neither_denies_nor_is_recorded",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("enforced", 2, enforce), p.op("small", 2, spare))
		allowedAre(t, "enforced beside a spare op that does not fit", got, true, false)
		// Unlike a shadow op, the spare op is not counted past its limit.
		charged(t, before, p.remaining(), map[string]uint64{"enforced": 2})
		allowedAre(t, "spare ops only, none fits", p.h.take(p.op("small", 2, spare), p.op("room", 11, spare)), false, false)
		charged(t, before, p.remaining(), map[string]uint64{"enforced": 2})
	},
}, {
	name: "denied_batch_charges_no_spare_op",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("room", 3, spare), p.op("small", 2, enforce))
		allowedAre(t, "spare with room + enforced over", got, true, false)
		charged(t, before, p.remaining(), nil)
	},
}, {
	name: "spare_after_enforced_on_one_key_sees_the_running_total",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.op("room", 7, enforce), p.op("room", 4, spare))
		allowedAre(t, "enforced 7 then spare 4 on a limit of 10", got, true, false)
		charged(t, before, p.remaining(), map[string]uint64{"room": 7})
		got = p.h.take(p.op("enforced", 7, enforce), p.op("enforced", 3, spare))
		allowedAre(t, "enforced 7 then spare 3 on a limit of 10", got, true, true)
		charged(t, before, p.remaining(), map[string]uint64{"room": 7, "enforced": 10})
	},
}, {
	name: "usage_is_recorded_past_the_limit",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.usage("small", 3), p.usage("room", 3))
		allowedAre(t, "usage over the limit, usage within it", got, false, true)
		charged(t, before, p.remaining(), map[string]uint64{"small": 1, "room": 3})
		// The key stays over: a check and an admission are denied, and a
		// report exactly at the limit of another key passes.
		allowedAre(t, "check and admission after usage past the limit",
			p.h.take(p.op("small", 0, enforce)), false)
		allowedAre(t, "usage exactly at the limit", p.h.take(p.usage("q2", 10), p.op("q2", 0, enforce)), true, true)
	},
}, {
	name: "denied_batch_records_its_usage",
	run: func(t *testing.T, p modeProbe) {
		before := p.remaining()
		got := p.h.take(p.usage("room", 3), p.op("enforced", 2, enforce), p.op("small", 2, enforce))
		allowedAre(t, "usage, room, enforced over", got, true, true, false)
		charged(t, before, p.remaining(), map[string]uint64{"room": 3})
	},
}}
