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

// testModes: shadow and quota ops keep one round trip per request without
// letting a rule that must not deny the request veto the others.
func testModes(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		small, big := basic(a, 1), basic(a, 10)
		h.at(time.Second)
		checkAll := func() []algorithms.Decision {
			return h.take(req("enforced", big, 0), req("shadow", small, 0), req("q1", small, 0), req("q2", big, 0))
		}
		before := checkAll()

		got := h.take(req("enforced", big, 2), withMode(req("shadow", small, 2), algorithms.Shadow))
		if !got[0].Allowed || got[1].Allowed {
			t.Fatalf("enforced op beside an over-limit shadow op: %s, %s; want allowed, denied", fmtDecision(got[0]), fmtDecision(got[1]))
		}
		after := checkAll()
		if after[0].Remaining != before[0].Remaining-2 {
			t.Errorf("enforced op beside a denied shadow op: remaining %d -> %d, want charged 2", before[0].Remaining, after[0].Remaining)
		}
		if after[1] != before[1] {
			t.Errorf("denied shadow op changed its key: %s -> %s", fmtDecision(before[1]), fmtDecision(after[1]))
		}

		// Quota ops are alternatives: one with room carries the request.
		got = h.take(withMode(req("q1", small, 2), algorithms.Quota), withMode(req("q2", big, 2), algorithms.Quota), req("enforced", big, 1))
		if got[0].Allowed || !got[1].Allowed || !got[2].Allowed {
			t.Fatalf("quota ops (over, room) + enforced: %s, %s, %s", fmtDecision(got[0]), fmtDecision(got[1]), fmtDecision(got[2]))
		}
		// Every quota op over: the batch is denied and charges nothing.
		mid := checkAll()
		got = h.take(withMode(req("q1", small, 2), algorithms.Quota), withMode(req("q2", big, 11), algorithms.Quota), req("enforced", big, 1))
		if got[0].Allowed || got[1].Allowed {
			t.Fatalf("quota ops both over: %s, %s", fmtDecision(got[0]), fmtDecision(got[1]))
		}
		if end := checkAll(); end[0] != mid[0] || end[3] != mid[3] {
			t.Errorf("a batch denied by its quota ops charged something: %s/%s -> %s/%s",
				fmtDecision(mid[0]), fmtDecision(mid[3]), fmtDecision(end[0]), fmtDecision(end[3]))
		}

		// An enforced denial writes nothing, shadow ops included.
		mid = checkAll()
		h.take(withMode(req("shadow", small, 1), algorithms.Shadow), req("enforced", big, 100))
		if end := checkAll(); end[1] != mid[1] {
			t.Errorf("shadow op of a denied batch was charged: %s -> %s", fmtDecision(mid[1]), fmtDecision(end[1]))
		}
	})
}
