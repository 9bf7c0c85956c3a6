package storetest

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// lookalikes are distinct keys a careless encoding (trimming, case folding,
// C strings, hash tags, separators) would merge.
var lookalikes = []string{"k", "K", "k ", " k", "k\x00", "k\x00x", "k:", "k_", "{k}", "kk", "ключ", "k\n"}

func testIndependentKeys(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		lim := basic(a, 4)
		h.at(6 * time.Second)
		// Key i gets i hits, so each key's remaining tells which hits it saw.
		for i, key := range lookalikes {
			if i == 0 {
				continue
			}
			h.take(req(key, lim, uint64(min(i, 4))))
		}
		for i, key := range lookalikes {
			got := h.take(req(key, lim, 0))[0]
			if want := lim.Capacity() - uint64(min(i, 4)); got.Remaining != want {
				t.Errorf("key %q: check %s, want remaining %d", key, fmtDecision(got), want)
			}
		}

		// Different limits on different keys do not leak into each other.
		small, large := basic(a, 1), basic(a, 1000)
		got := h.take(req("small", small, 1), req("large", large, 7))
		if !got[0].Allowed || !got[1].Allowed || got[0].Remaining != 0 || got[1].Remaining != 993 {
			t.Errorf("small/large: %s, %s; want allowed with remaining 0 and 993", fmtDecision(got[0]), fmtDecision(got[1]))
		}
	})
}
