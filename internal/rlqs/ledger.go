package rlqs

import (
	"math"
	"time"
)

// window is a bucket's ledger in its counters' current window.
//
// The bound (docs/rlqs.md): Envoy's token bucket holds at most what it
// started with plus what it refilled, and admits one request per whole
// token, so what it admits in a window is at most floor(committed), where
// committed adds, for each grant this stream sent in the window, its
// max_tokens when it may start full (nothing held before it, or held by
// another stream: Envoy seeds a replacement with at most its max_tokens),
// and its refill rate times the longest it can be in force in the window
// (from when it was sent until the next grant may have arrived, or until
// the window ends: its TTL ends by then). Every grant is sent only once
// charged >= committed - 1/2 holds with it: the hits Spare ops took in
// the store for this window, before Envoy could use them.
type window struct {
	// end and late are the window's end read before and after the store
	// call that told it (zero until one did): grants expire by end; by
	// late the next window has begun.
	end, late time.Time
	sliding   bool
	charged   uint64  // hits charged in this window (every counter alike)
	committed float64 // the most Envoy may admit in this window by the grants
	allowed   uint64  // requests Envoy reported allowed in this window
	recorded  uint64  // of those, recorded as usage: admitted beyond the grants
	full      bool    // the counter had no room: no more grants until the window ends
	// The grant in force: its max_tokens (0: none in this window), refill
	// rate (tokens a second), and what Envoy is thought to hold (an
	// estimate from the reports, for sizing only).
	maxTokens uint32
	rate      float64
	tokens    float64
	tokensAt  time.Time
	// carry is what the last window's grants held unreported when it
	// ended: the first reports after it are that window's up to carry.
	// (This decides only what is recorded as usage: every grant is
	// charged before Envoy gets it, whatever the reports say.)
	carry uint64
}

// slack is how far committed may exceed charged: what Envoy admits is a
// whole number at most committed, so anything under one is exact; a half
// leaves room for floating-point dust in Envoy's token arithmetic.
const slack = 0.5

// cut is committed with the grant in force cut at now: its refill counted
// until now instead of until the window's end.
func (w *window) cut(now time.Time) float64 {
	if w.maxTokens == 0 {
		return w.committed
	}
	return max(w.committed-w.rate*max(w.end.Sub(now), 0).Seconds(), 0)
}

// grant records a grant of maxTokens refilling at rate, sent at now;
// fresh says Envoy may start it full. It replaces the grant in force
// when it arrives, up to margin later: until then the old one refills at
// its rate, which counts when it is the higher one.
func (w *window) grant(now time.Time, margin time.Duration, maxTokens uint32, rate float64, fresh bool) {
	life := max(w.end.Sub(now), 0).Seconds()
	old := w.inForce()
	w.committed = w.cut(now) + rate*life + max(old-rate, 0)*margin.Seconds()
	if fresh {
		w.committed += float64(maxTokens)
		w.tokens = float64(maxTokens)
	}
	w.maxTokens, w.rate = maxTokens, rate
	w.tokensAt = now
}

// inForce is the refill rate of the grant in force (0: none).
func (w *window) inForce() float64 {
	if w.maxTokens == 0 {
		return 0
	}
	return w.rate
}

// fit is the largest refill rate a grant of fresh max_tokens m sent at
// now may have so that committed stays within charged + slack (see
// grant); negative when even none fits.
func (w *window) fit(now time.Time, margin time.Duration, m uint32) float64 {
	life := w.end.Sub(now).Seconds()
	old, mg := w.inForce(), margin.Seconds()
	rest := float64(w.charged) + slack - w.cut(now) - float64(m)
	if r := rest / life; r >= old {
		return r
	}
	return (rest - old*mg) / (life - mg)
}

// spend updates the estimate of what Envoy holds with a report of allowed
// requests received at now.
func (w *window) spend(now time.Time, allowed uint64) {
	if w.maxTokens == 0 {
		return
	}
	w.tokens += w.rate * max(now.Sub(w.tokensAt), 0).Seconds()
	w.tokens = max(min(w.tokens, float64(w.maxTokens))-float64(allowed), 0)
	w.tokensAt = now
}

// ahead is what the grant in force will still let Envoy admit from now
// to the window's end (less margin): what it holds plus its refill.
func (w *window) ahead(now time.Time, margin time.Duration) float64 {
	if w.maxTokens == 0 {
		return 0
	}
	held := min(w.tokens+w.rate*max(now.Sub(w.tokensAt), 0).Seconds(), float64(w.maxTokens))
	return held + w.rate*max(w.end.Sub(now)-margin, 0).Seconds()
}

// maxFill is the longest fill interval a Duration holds, in seconds.
const maxFill = 315_576_000_000

// encodeRate is a refill of at most rate tokens a second as Envoy's
// token bucket reads it: tokens_per_fill over whole fill seconds
// (fractions of a second are dropped, and the nanos are left free to tell
// grants apart). About a thousand tokens per fill keep it within 0.1% of
// rate. A rate that would not refill a whole token in horizon seconds
// (the longest window, plus one) refills one per fill of at least that
// long, or of maxFill (a few hundred-billionths of a token a second,
// counted in the ledger all the same): such a grant is a block.
func encodeRate(rate float64, horizon int64) (perFill uint32, fill int64, encoded float64) {
	if rate*float64(horizon) < 1 {
		fill = maxFill
		if rate > 0 {
			fill = min(max(int64(math.Ceil(1/rate)), horizon), maxFill)
		}
		return 1, fill, 1 / float64(fill)
	}
	fill = min(max(int64(math.Ceil(1000/rate)), 1), maxFill)
	tokens := min(math.Floor(rate*float64(fill)), math.MaxUint32)
	return uint32(tokens), fill, tokens / float64(fill)
}
