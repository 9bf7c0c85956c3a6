package rlqs

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestEncodeRate: the encoded refill never exceeds the rate asked (the
// ledger counts the encoded one), is within 0.1% of it from a token per
// horizon on, and below that refills less than a token in the horizon.
func TestEncodeRate(t *testing.T) {
	const horizon = 61
	for _, rate := range []float64{0, 1e-9, 0.001, 1.0 / horizon, 0.05, 0.7, 1, 3.3, 123.456, 99_999, 5e9} {
		perFill, fill, enc := encodeRate(rate, horizon)
		if perFill < 1 || fill < 1 || fill > maxFill || enc != float64(perFill)/float64(fill) {
			t.Errorf("rate %g: %d per %d s (%g): want both at least 1, the rate theirs", rate, perFill, fill, enc)
		}
		switch {
		case rate*horizon < 1 && enc*horizon >= 1:
			t.Errorf("rate %g: encoded %g refills a token in %d s", rate, enc, horizon)
		case rate*horizon >= 1 && rate < math.MaxUint32 && (enc > rate || enc < rate*0.999):
			t.Errorf("rate %g: encoded %g, want within 0.1%% below", rate, enc)
		case rate > 0 && rate*horizon < 1 && enc > rate:
			t.Errorf("rate %g: encoded %g above it", rate, enc)
		}
	}
}

// TestLedgerBound: whatever grants a window's ledger makes (fresh ones and
// top-ups, at random times, each reaching a greedy Envoy up to the margin
// later), Envoy's token bucket admits at most what the ledger charged,
// and committed stays within charged plus the slack.
func TestLedgerBound(t *testing.T) {
	const margin = 100 * time.Millisecond
	rnd := rand.New(rand.NewPCG(1, 2))
	start := time.Unix(1_800_000_000, 0)
	for run := range 500 {
		w := window{end: start.Add(10 * time.Second)}
		env := &greedy{}
		now := start
		for now.Before(w.end.Add(-time.Second)) {
			now = now.Add(time.Duration(rnd.IntN(3000)) * time.Millisecond)
			if !now.Before(w.end.Add(-time.Second)) {
				break
			}
			w.charged += uint64(rnd.IntN(4000))
			fresh := w.maxTokens == 0 || rnd.IntN(4) == 0
			m := w.maxTokens
			if fresh {
				room := math.Floor(float64(w.charged) + slack - w.cut(now) - w.inForce()*margin.Seconds())
				if room < 1 {
					continue
				}
				m = uint32(1 + rnd.IntN(int(room)))
			}
			start0 := m
			if !fresh {
				start0 = 0
			}
			_, _, rate := encodeRate(max(w.fit(now, margin, start0), 0), 11)
			w.grant(now, margin, m, rate, fresh)
			if w.committed > float64(w.charged)+slack+1e-9 {
				t.Fatalf("run %d: committed %.3f over charged %d + slack", run, w.committed, w.charged)
			}
			env.apply(now.Add(time.Duration(rnd.Int64N(int64(margin)))), m, rate, fresh)
		}
		if got := env.until(w.end); got > float64(w.charged) {
			t.Fatalf("run %d: Envoy admitted %.0f, %d charged", run, got, w.charged)
		}
	}
}

// greedy is Envoy's token bucket under a load that takes every whole
// token as soon as it is there.
type greedy struct {
	at             time.Time
	tokens         float64 // held (fractions of a token)
	max, rate      float64
	admitted       float64
	pendingAt      time.Time
	pM, pRate      float64
	pFresh, queued bool
}

// apply queues a grant that arrives at at (after any queued earlier).
func (g *greedy) apply(at time.Time, m uint32, rate float64, fresh bool) {
	if g.queued && at.Before(g.pendingAt) {
		at = g.pendingAt // the stream keeps order
	}
	g.flush(at)
	g.pendingAt, g.pM, g.pRate, g.pFresh, g.queued = at, float64(m), rate, fresh, true
}

// flush runs the bucket until t, applying a queued grant due by then.
func (g *greedy) flush(t time.Time) {
	if g.queued && !g.pendingAt.After(t) {
		g.run(g.pendingAt)
		if g.pFresh {
			g.tokens = g.pM
		} else {
			g.tokens = math.Trunc(g.pM * (g.tokens / g.max))
		}
		g.max, g.rate, g.queued = g.pM, g.pRate, false
	}
	g.run(t)
}

// run refills and takes whole tokens until t: taken as they come, the
// tokens never reach max_tokens (at least one), so nothing is capped.
func (g *greedy) run(t time.Time) {
	if g.max > 0 && t.After(g.at) {
		g.tokens += g.rate * t.Sub(g.at).Seconds()
	}
	whole := math.Floor(g.tokens)
	g.admitted += whole
	g.tokens -= whole
	g.at = t
}

// until is what it admitted by t.
func (g *greedy) until(t time.Time) float64 {
	g.flush(t)
	return g.admitted
}

// TestHorizon: a grant that refills less than a token a window gets a
// fill interval longer than the longest window of its limits: calendar
// months count 31 days (a month's Period is a nominal 30), several months
// as many times that.
func TestHorizon(t *testing.T) {
	day := 24 * time.Hour
	month := func(n int64) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Calendar: true, Requests: 10, Period: time.Duration(n) * algorithms.Month}
	}
	minute := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute}
	for _, tt := range []struct {
		limits []algorithms.Limit
		want   time.Duration
	}{
		{[]algorithms.Limit{minute}, time.Minute},
		{[]algorithms.Limit{month(1)}, 31 * day},
		{[]algorithms.Limit{minute, month(3)}, 93 * day},
	} {
		b := &bucket{}
		for _, l := range tt.limits {
			b.tgt.counters = append(b.tgt.counters, counter{limit: l})
		}
		if got := b.horizon(); got != tt.want {
			t.Errorf("%v: horizon %v, want %v", tt.limits, got, tt.want)
		}
		if _, fill, rate := encodeRate(0.9/tt.want.Seconds(), fillSeconds(b.horizon())); time.Duration(fill)*time.Second <= tt.want || rate*tt.want.Seconds() >= 1 {
			t.Errorf("%v: a grant without refill fills every %d s, within the window", tt.limits, fill)
		}
	}
}
