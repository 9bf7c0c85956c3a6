package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// StateReader is a store that reads back the state it holds for a key
// (memstore and redisstore do): the exact case compares stored states,
// not only the answers they give.
type StateReader interface {
	State(ctx context.Context, key string, lim algorithms.Limit) (algorithms.State, error)
}

// RunExact runs the exact case alone (Run includes it), for backends whose
// other cases run elsewhere (a Cluster, where a request's keys fall on
// different masters).
func RunExact(t *testing.T, newStore Factory) {
	t.Run("exact", func(t *testing.T) { testExact(t, newStore) })
}

// exactMixes are the modes of the ops the exact case draws beside the op
// that denies its request: one mode each, then all of them in one request.
var exactMixes = []struct {
	name  string
	modes []exactMode
}{
	{"enforce", []exactMode{enforceOp}},
	{"shadow", []exactMode{shadowOp}},
	{"quota", []exactMode{quotaOp}},
	{"usage", []exactMode{usageOp}},
	{"refund", []exactMode{refundOp}},
	{"spare", []exactMode{spareOp}},
	{"mixed", []exactMode{enforceOp, shadowOp, quotaOp, usageOp, refundOp, spareOp}},
}

// exactTrials is how many denied requests the exact case draws per
// algorithm and mix.
const exactTrials = 24

// testExact: the one property of a denied request, on every algorithm, mode
// and mix of modes: afterwards every counter holds exactly what it held
// before (Limit.Canonical: the state as it decides from now on), but for
// what the request's usage ops recorded and its refunds gave back, exactly
// as algorithms.TakeAll leaves them. Keys carry hash tags of three Cluster
// masters ({a} and {d} share one, {a} twice shares a slot), so on a Cluster
// the request is decided by several slot groups, some of which admit their
// own ops and must be undone. States are read back from the store
// (StateReader) and compared with the reference's.
func testExact(t *testing.T, newStore Factory) {
	for _, mix := range exactMixes {
		t.Run(mix.name, func(t *testing.T) {
			forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
				r, ok := h.s.(StateReader)
				if !ok {
					t.Skipf("%T reads back no state (storetest.StateReader)", h.s)
				}
				x := &exactRun{h: h, r: r, a: a, rng: rand.New(rand.NewPCG(uint64(a), uint64(len(mix.name))))}
				h.at(time.Hour)
				denied := 0
				for trial := range exactTrials {
					if x.trial(t, fmt.Sprintf("%s:%d", mix.name, trial), mix.modes) {
						denied++
					}
				}
				if denied < exactTrials/2 {
					t.Errorf("only %d of %d drawn requests were denied: the case barely judges anything", denied, exactTrials)
				}
			})
		})
	}
}

// exactRun is one algorithm's trials on one store.
type exactRun struct {
	h        *harness
	r        StateReader
	a        algorithms.Algorithm
	rng      *rand.Rand
	lastSync time.Time
}

// keepAhead advances the test clock by twice the real time since its last
// call. Redis drops a key when its TTL runs out in real time; on a slow box
// the test clock could lag behind, and a key the reference still holds would
// read fresh. With the test clock running faster, a key Redis dropped has
// also expired for the reference.
func (x *exactRun) keepAhead() {
	now := time.Now()
	if !x.lastSync.IsZero() {
		x.h.clock.Advance(2 * now.Sub(x.lastSync))
	}
	x.lastSync = now
}

// trial draws fresh keys with a history, then requests until the reference
// denies one (a few tries), and holds the store's states after it to the
// reference's. It reports whether a denied request was judged.
func (x *exactRun) trial(t *testing.T, name string, modes []exactMode) bool {
	t.Helper()
	keys := []string{"{a}x:" + name, "{a}y:" + name, "{b}x:" + name, "{c}x:" + name, "{d}x:" + name}
	limits := make(map[string]algorithms.Limit, len(keys))
	for _, k := range keys {
		limits[k] = x.limit()
		x.history(k, limits[k])
	}
	for range 8 {
		x.h.clock.Advance(time.Duration(x.rng.Int64N(int64(time.Second))))
		reqs := x.request(keys, limits, modes)
		before := x.read(t, keys, limits)
		x.keepAhead()
		if !x.deniedByReference(reqs) {
			continue
		}
		x.h.take(reqs...)
		x.judge(t, name, reqs, keys, limits, before)
		return true
	}
	return false
}

// judge compares every key's state after the denied request with the
// reference's, and a key no usage op or refund named with its own state
// before the request.
func (x *exactRun) judge(t *testing.T, name string, reqs []store.Request, keys []string, limits map[string]algorithms.Limit, before map[string]algorithms.State) {
	t.Helper()
	after := x.read(t, keys, limits)
	x.keepAhead()
	now := x.h.clock.Now()
	for _, k := range keys {
		lim := limits[k]
		got := lim.Canonical(after[k], now)
		if want := lim.Canonical(x.h.model.states[k], now); !got.Equal(want) {
			t.Errorf("%s: %s after a denied request holds %s, the reference %s\nbefore %s\n%s",
				name, k, fmtState(got), fmtState(want), fmtState(lim.Canonical(before[k], now)), fmtReqs(reqs))
			continue
		}
		if !recordsOn(reqs, k) {
			if was := lim.Canonical(before[k], now); !got.Equal(was) {
				t.Errorf("%s: %s after a denied request holds %s, before it %s\n%s", name, k, fmtState(got), fmtState(was), fmtReqs(reqs))
			}
		}
	}
}

// read reads every key's state from the store.
func (x *exactRun) read(t *testing.T, keys []string, limits map[string]algorithms.Limit) map[string]algorithms.State {
	t.Helper()
	out := make(map[string]algorithms.State, len(keys))
	for _, k := range keys {
		st, err := x.r.State(t.Context(), k, limits[k])
		if err != nil {
			t.Fatalf("State(%s): %v", k, err)
		}
		out[k] = st
	}
	return out
}

// deniedByReference reports whether the reference denies reqs now, without
// changing its states.
func (x *exactRun) deniedByReference(reqs []store.Request) bool {
	return x.h.model.peek(reqs, x.h.clock.Now()).Denied
}

// recordsOn reports whether a usage op or a refund of reqs names key: the
// two a denied request applies.
func recordsOn(reqs []store.Request, key string) bool {
	for _, r := range reqs {
		if r.Key == key && r.Hits > 0 && (r.Usage || r.Mode == algorithms.NegativeHits) {
			return true
		}
	}
	return false
}

func fmtState(st algorithms.State) string {
	if st.ExpiresAt == 0 {
		return "fresh"
	}
	if len(st.Log) > 0 {
		return fmt.Sprintf("log %v until %d", st.Log, st.ExpiresAt)
	}
	// Every view names the same three registers: Window's shows them all.
	w := algorithms.ViewOf[algorithms.Window](st)
	return fmt.Sprintf("(%d %d %d) until %d", w.Start, w.Count, w.Prev, st.ExpiresAt)
}

func fmtReqs(reqs []store.Request) string {
	var b strings.Builder
	b.WriteString("request:")
	for _, r := range reqs {
		fmt.Fprintf(&b, "\n  %s %+v hits=%d mode=%d usage=%t joined=%t", r.Key, r.Limit, r.Hits, r.Mode, r.Usage, r.Joined)
	}
	return b.String()
}
