package algorithms

import (
	"testing"
	"time"
)

// TestCanonical: a state's Canonical form decides every later op as the
// state does (probes of several sizes, at now and later), is its own
// Canonical form, and is the zero State exactly when the state decides as
// a fresh one at now; usage past the limit (usageHistory) included.
func TestCanonical(t *testing.T) {
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			usageHistory(t, alg, func(lim Limit, st State, now time.Time, _ uint64, _ Decision, _ State) {
				c := lim.Canonical(st, now)
				if again := lim.Canonical(c, now); !again.Equal(c) {
					t.Fatalf("Canonical of %+v is %+v, of that %+v", st, c, again)
				}
				fresh := true
				at := now
				for k := range 4 {
					for _, h := range []uint64{0, 1, 2, lim.Capacity(), lim.Capacity() + lim.MaxDebt + 1} {
						ds, nexts := Take(lim, st, h, at)
						dc, nextc := Take(lim, c, h, at)
						if ds != dc {
							t.Fatalf("%d hits at +%s: state %+v decides %s, its Canonical form %+v %s", h, at.Sub(now), st, fmtD(ds), c, fmtD(dc))
						}
						if ds.Allowed && h > 0 && !lim.Canonical(nexts, at).Equal(lim.Canonical(nextc, at)) {
							t.Fatalf("%d hits at +%s: state %+v leaves %+v, its Canonical form %+v", h, at.Sub(now), st, nexts, nextc)
						}
						if k == 0 {
							df, _ := Take(lim, State{}, h, now)
							fresh = fresh && ds == df
						}
					}
					at = at.Add(time.Duration(1+k*k) * lim.Period / 7)
				}
				if (c.ExpiresAt == 0) != fresh {
					t.Fatalf("state %+v decides as fresh: %v, its Canonical form %+v", st, fresh, c)
				}
			})
		})
	}
}
