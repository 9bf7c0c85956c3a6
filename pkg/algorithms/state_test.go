package algorithms

import "testing"

// TestViewRoundTrip: StateOf and ViewOf are inverse for every view, and
// StateOf marks the state as its algorithm's, as Take does (a fresh state
// stays unmarked).
func TestViewRoundTrip(t *testing.T) {
	const e = 99
	w, b := Window{Start: 1, Count: 2, Prev: 3}, Bucket{Last: 4, Tokens: -5, Frac: 6}
	m, a := Meter{Last: 7, Level: 8, Frac: 9}, Arrival{TAT: 10, Frac: 11}
	if got := ViewOf[Window](StateOf(SlidingWindow, w, e)); got != w {
		t.Errorf("window %+v, want %+v", got, w)
	}
	if got := ViewOf[Bucket](StateOf(TokenBucket, b, e)); got != b {
		t.Errorf("bucket %+v, want %+v", got, b)
	}
	if got := ViewOf[Meter](StateOf(LeakyBucket, m, e)); got != m {
		t.Errorf("meter %+v, want %+v", got, m)
	}
	if got := ViewOf[Arrival](StateOf(GCRA, a, e)); got != a {
		t.Errorf("arrival %+v, want %+v", got, a)
	}
	for _, alg := range All() {
		s, _ := alg.lookup()
		if s.family == familyLog {
			continue
		}
		if st := StateOf(alg, w, e); st.family != s.family || st.regs != [3]int64{1, 2, 3} || st.ExpiresAt != e {
			t.Errorf("%s: StateOf = %+v, want family %d", alg, st, s.family)
		}
		if st := StateOf(alg, w, 0); st.family != 0 {
			t.Errorf("%s: a fresh StateOf is marked %d", alg, st.family)
		}
	}
}
