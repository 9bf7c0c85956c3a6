package lease_test

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// answered locally: all or nothing over several keys; a batch with one op
// lacking room goes to the backend whole, topping that key's lease up;
// checks, usage and non-enforce ops pass through untouched.
func TestLocalAnswers(t *testing.T) {
	for _, tt := range localAnswerCases {
		t.Run(tt.name, func(t *testing.T) {
			r := leaseAB(t)
			r.clock.Advance(time.Millisecond)
			before := r.s.Stats()
			countA, countB := r.count("a", localLim), r.count("b", localOther)
			res, local := r.local(tt.reqs...)
			after := r.s.Stats()
			if local != tt.wantLocal {
				t.Fatalf("local %v, want %v", local, tt.wantLocal)
			}
			if !local {
				checkBackendBatch(t, r, before, tt.wantBackend)
				return
			}
			// Charged before: the backend's counters do not move.
			if r.count("a", localLim) != countA || r.count("b", localOther) != countB {
				t.Fatal("a local answer reached the backend's counters")
			}
			var hits uint64
			for _, op := range tt.reqs {
				hits += op.Hits
			}
			if after.LocalHits-before.LocalHits != hits || before.Outstanding-after.Outstanding != hits {
				t.Fatalf("stats %+v then %+v for %d hits", before, after, hits)
			}
			for i, x := range res {
				if !x.Allowed || x.FromCache || x.RetryAfter != 0 || x.ResetAfter <= 0 || x.ResetAfter > time.Minute ||
					x.Remaining > tt.reqs[i].Limit.Requests {
					t.Fatalf("result %d: %+v", i, x)
				}
			}
		})
	}
}

// The limits of TestLocalAnswers' keys a and b.
var localLim, localOther = fixed(1000, time.Minute), fixed(500, time.Minute)

// localAnswerCases are TestLocalAnswers'.
var localAnswerCases = []struct {
	name      string
	reqs      []store.Request
	wantLocal bool
	// wantBackend is the batch the backend gets (nil: reqs unchanged),
	// Spare ops included.
	wantBackend []store.Request
}{{
	name:      "every key has room",
	reqs:      []store.Request{hit("a", localLim, 1), hit("b", localOther, 1)},
	wantLocal: true,
}, {
	name:      "a key named twice within its room",
	reqs:      []store.Request{hit("a", localLim, 1), hit("b", localOther, 1), hit("a", localLim, 1)},
	wantLocal: true,
}, {
	name:        "a key named twice beyond its room",
	reqs:        []store.Request{hit("a", localLim, 2), hit("b", localOther, 1), hit("a", localLim, 1)},
	wantBackend: []store.Request{hit("a", localLim, 2), hit("b", localOther, 1), hit("a", localLim, 1), spare("a", localLim, 0)},
}, {
	name:        "one key without a lease",
	reqs:        []store.Request{hit("a", localLim, 1), hit("c", localLim, 1)},
	wantBackend: []store.Request{hit("a", localLim, 1), hit("c", localLim, 1)},
}, {
	name:        "one op lacking room tops its key up",
	reqs:        []store.Request{hit("a", localLim, 1), hit("b", localOther, 3)},
	wantBackend: []store.Request{hit("a", localLim, 1), hit("b", localOther, 3), spare("b", localOther, 0)},
}, {
	name:        "a check passes through",
	reqs:        []store.Request{hit("a", localLim, 0)},
	wantBackend: []store.Request{hit("a", localLim, 0)},
}, {
	name:        "usage passes through, no top-up on its key",
	reqs:        []store.Request{{Key: "a", Limit: localLim, Hits: 5, Usage: true, Lease: true}, hit("a", localLim, 3)},
	wantBackend: []store.Request{{Key: "a", Limit: localLim, Hits: 5, Usage: true, Lease: true}, hit("a", localLim, 3)},
}, {
	name:        "shadow passes through",
	reqs:        []store.Request{{Key: "a", Limit: localLim, Hits: 1, Mode: algorithms.Shadow, Lease: true}},
	wantBackend: []store.Request{{Key: "a", Limit: localLim, Hits: 1, Mode: algorithms.Shadow, Lease: true}},
}, {
	name:        "an op without Lease",
	reqs:        []store.Request{hit("a", localLim, 1), {Key: "b", Limit: localOther, Hits: 1}},
	wantBackend: []store.Request{hit("a", localLim, 1), {Key: "b", Limit: localOther, Hits: 1}},
}, {
	name:        "a rule changed by reload",
	reqs:        []store.Request{hit("a", fixed(999, time.Minute), 1)},
	wantBackend: []store.Request{hit("a", fixed(999, time.Minute), 1)},
}}

// leaseAB leases a and b with room for 2 hits each.
func leaseAB(t *testing.T) *rig {
	t.Helper()
	r := newRig(t)
	for key, l := range map[string]algorithms.Limit{"a": localLim, "b": localOther} {
		for range 20 {
			r.take(hit(key, l, 1))
			r.clock.Advance(time.Millisecond)
		}
		room := r.s.Room(key)
		if room < 2 {
			t.Fatalf("%s: room %d", key, room)
		}
		if _, ok := r.local(hit(key, l, room-2)); room > 2 && !ok {
			t.Fatalf("%s: %d hits of room %d not local", key, room-2, room)
		}
	}
	return r
}

// checkBackendBatch: a batch that went to the backend used no lease and
// reached it as want (a Spare op of any size of at least 2).
func checkBackendBatch(t *testing.T, r *rig, before lease.Stats, want []store.Request) {
	t.Helper()
	if r.s.Stats().LocalHits != before.LocalHits {
		t.Fatal("a batch that went to the backend used a lease")
	}
	got := r.rec.last().reqs
	if len(got) != len(want) {
		t.Fatalf("backend got %+v, want %+v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if w.Mode == algorithms.Spare && g.Mode == algorithms.Spare && g.Key == w.Key && g.Limit == w.Limit && g.Hits >= 2 {
			continue // its size is TestBlockSizing's business
		}
		if g != w {
			t.Fatalf("backend op %d: %+v, want %+v", i, g, w)
		}
	}
}

// spare is the top-up the backend should see (hits 0: any size).
func spare(key string, lim algorithms.Limit, hits uint64) store.Request {
	return store.Request{Key: key, Limit: lim, Hits: hits, Mode: algorithms.Spare}
}

// A local answer reports what this replica could still admit: the
// backend's latest Remaining plus the lease's room, and the window's end.
func TestLocalDecision(t *testing.T) {
	r := newRig(t)
	lim := fixed(1000, time.Minute)
	r.clock.Advance(20 * time.Second)
	for range 30 {
		r.take(hit("k", lim, 1))
		r.clock.Advance(time.Millisecond)
	}
	ops, ds := r.rec.spares()
	if len(ops) == 0 {
		t.Fatal("no block")
	}
	res, local := r.local(hit("k", lim, 1))
	if !local {
		t.Fatal("not answered locally")
	}
	stats := r.s.Stats()
	want := algorithms.Decision{Allowed: true, Remaining: ds[len(ds)-1].Remaining + stats.Outstanding,
		ResetAfter: time.Minute - 20*time.Second - 30*time.Millisecond}
	if res[0].Decision != want {
		t.Fatalf("local decision %+v, want %+v", res[0].Decision, want)
	}
	if want.Remaining != lim.Requests-31 {
		t.Fatalf("remaining %d after 31 hits of %d", want.Remaining, lim.Requests)
	}
}
