package storetest

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Epoch is where every subtest's clock starts: midnight UTC, so it is aligned
// to every window length that divides a day, and in the future, so a backend
// that turns the clock into absolute expiry times never sees them in the past.
func Epoch() time.Time { return time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC) }

// harness runs requests against the store under test and the model side by
// side; every decision is compared, so each subtest checks the full contract
// even where it asserts only one property by hand.
type harness struct {
	t     *testing.T
	s     store.Store
	clock *Clock
	model *model
}

func newHarness(t *testing.T, newStore Factory) *harness {
	t.Helper()
	clock := NewClock(Epoch())
	s := newStore(t, clock)
	if s == nil {
		t.Fatal("storetest: factory returned a nil store")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &harness{t: t, s: s, clock: clock, model: newModel()}
}

// at sets the clock to Epoch+d.
func (h *harness) at(d time.Duration) { h.clock.Set(Epoch().Add(d)) }

// take runs one batch, fails the test on a store error, and reports any
// decision, or amount applied, that differs from the model's.
func (h *harness) take(reqs ...store.Request) []algorithms.Decision {
	h.t.Helper()
	res := h.takeResults(reqs)
	h.compare(reqs, res, h.model.take(reqs, h.clock.Now()))
	return decisionsOf(res)
}

// compare reports every result of reqs that differs from the reference's.
func (h *harness) compare(reqs []store.Request, res []store.Result, want algorithms.Batch) {
	h.t.Helper()
	for i := range reqs {
		if res[i].Decision != want.Decisions[i] || res[i].Applied != want.Applied[i] {
			h.t.Errorf("%s: op %d (key %q, %d hits): store %s applied %d, reference (algorithms.TakeAll) %s applied %d",
				h.clock.Now().Sub(Epoch()), i, reqs[i].Key, reqs[i].Hits, fmtDecision(res[i].Decision), res[i].Applied, fmtDecision(want.Decisions[i]), want.Applied[i])
		}
	}
}

// expect is take plus hand-written expectations; when a decision is off it
// says whether the reference agrees with the table, which tells the store's
// bug apart from pkg/algorithms' (or the table's).
func (h *harness) expect(label string, reqs []store.Request, want []algorithms.Decision) {
	h.t.Helper()
	got := h.takeRaw(reqs)
	ref := h.model.take(reqs, h.clock.Now()).Decisions
	for i := range reqs {
		if got[i] == want[i] && ref[i] == want[i] {
			continue
		}
		switch {
		case ref[i] == want[i]:
			h.t.Errorf("%s: op %d (key %q, %d hits): store %s, want %s (reference agrees with want: the store is wrong)",
				label, i, reqs[i].Key, reqs[i].Hits, fmtDecision(got[i]), fmtDecision(want[i]))
		case got[i] == ref[i]:
			h.t.Errorf("%s: op %d (key %q, %d hits): store and reference %s, want %s (pkg/algorithms or this table is wrong)",
				label, i, reqs[i].Key, reqs[i].Hits, fmtDecision(got[i]), fmtDecision(want[i]))
		default:
			h.t.Errorf("%s: op %d (key %q, %d hits): store %s, reference %s, want %s (all three differ)",
				label, i, reqs[i].Key, reqs[i].Hits, fmtDecision(got[i]), fmtDecision(ref[i]), fmtDecision(want[i]))
		}
	}
}

func (h *harness) takeRaw(reqs []store.Request) []algorithms.Decision {
	h.t.Helper()
	return decisionsOf(h.takeResults(reqs))
}

func (h *harness) takeResults(reqs []store.Request) []store.Result {
	h.t.Helper()
	res, err := h.s.Take(h.t.Context(), reqs)
	if err != nil {
		h.t.Fatalf("%s: Take(%d requests): %v", h.clock.Now().Sub(Epoch()), len(reqs), err)
	}
	if len(res) != len(reqs) {
		h.t.Fatalf("%s: Take(%d requests) returned %d results", h.clock.Now().Sub(Epoch()), len(reqs), len(res))
	}
	return res
}

func decisionsOf(res []store.Result) []algorithms.Decision {
	out := make([]algorithms.Decision, len(res))
	for i, r := range res {
		out[i] = r.Decision
	}
	return out
}

func req(key string, lim algorithms.Limit, hits uint64) store.Request {
	return store.Request{Key: key, Limit: lim, Hits: hits}
}

func reqs(rs ...store.Request) []store.Request { return rs }

func decisions(ds ...algorithms.Decision) []algorithms.Decision { return ds }
