package storetest

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func testExpiry(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		lim := basic(a, 5)
		h.at(3*time.Second + 250*time.Millisecond)
		h.take(req("old", lim, 2), req("old", lim, 3))
		st, ok := h.model.states["old"]
		if !ok || st.ExpiresAt == 0 {
			t.Fatalf("the reference kept no expiring state for a used key: %+v", st)
		}
		expires := time.UnixMicro(st.ExpiresAt)
		if !expires.After(h.clock.Now()) {
			t.Fatalf("state expires at %s, not after now %s", expires, h.clock.Now())
		}

		// Once the state has expired, the old key and a never-used key must
		// be indistinguishable: same check, same take.
		h.clock.Set(expires)
		checks := h.take(req("old", lim, 0), req("new", lim, 0))
		if checks[0] != checks[1] {
			t.Errorf("at expiry: old key %s, fresh key %s", fmtDecision(checks[0]), fmtDecision(checks[1]))
		}
		if checks[0].Remaining != lim.Capacity() {
			t.Errorf("at expiry: check %s, want remaining %d", fmtDecision(checks[0]), lim.Capacity())
		}
		takes := h.take(req("old", lim, 5), req("new", lim, 5))
		if takes[0] != takes[1] || !takes[0].Allowed {
			t.Errorf("at expiry: old key %s, fresh key %s; want both allowed and equal", fmtDecision(takes[0]), fmtDecision(takes[1]))
		}
	})
}
