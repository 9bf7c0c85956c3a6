package rlqs

import (
	"math"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// verdict is what a bucket of window limits needs now.
type verdict struct {
	// grant: send a new token bucket, with extra hits charged first
	// (0: from what the ledger already charged).
	grant bool
	extra uint64
	// fresh: Envoy may start it full (see window).
	fresh bool
	deny  bool // the counter is spent and Envoy holds nothing: DENY_ALL
	peek  bool // learn the window's end (a foreign grant adopted)
}

// headroom is how much more than its reported rate a grant gives a
// bucket while its counters have room: its demand may grow before the
// next report.
const headroom = 1.1

// plan decides what the bucket needs: a first grant in its window (fresh),
// a top-up of the grant in force when that falls short of the bucket's
// demand until the window ends, or nothing. Each grant is at most a
// fraction of what the counters had left (RLQS_FRACTION), so that Envoys
// share what is left: every Envoy asking gets at least that fraction of
// it. known reads what the replica last learned of a counter; turn says
// the window just turned or the rule changed (no spacing applies).
func (b *bucket) plan(now time.Time, s settings, known func(string) (span, bool), turn bool) verdict {
	w := &b.win
	holds := b.holds(now, s.margin)
	if w.full && !w.sliding && now.Before(w.end) {
		return verdict{deny: !holds}
	}
	rest, spent := b.rest(known)
	if spent {
		return verdict{deny: !holds}
	}
	left := b.timeLeft(now, known)
	if left < time.Second+s.margin+2*timerSlack {
		// Too late in the window for a whole-second TTL to end in it.
		return verdict{}
	}
	share := b.share(rest, s)
	if turn && b.starting(now, known, s.interval/2) {
		// Every busy Envoy asks as the window starts: each gets the same
		// share of the limit, whoever asks first.
		share = b.share(b.limit(), s)
	}
	usable := (left - s.margin).Seconds()
	if b.foreign && !turn && (!b.limited || float64(share) <= b.admits*usable) {
		// Envoy holds another stream's grant (its replica died), and it
		// serves its demand, or more than a grant could now: keep it
		// (replacing it would lose the refill charged for it) until the
		// window turns.
		return verdict{peek: w.end.IsZero()}
	}
	if !turn && !b.lastCall.IsZero() && now.Sub(b.lastCall) < s.interval/2 {
		return verdict{}
	}
	want := b.rate*usable + 1
	if want*headroom <= float64(rest)*s.fraction {
		// Room for every Envoy to want as much: a tenth more, for demand
		// that grows before the next report. Where it is short, a grant
		// beyond the demand would be hits lost to the others.
		want *= headroom
	}
	if !holds || b.foreign {
		if !b.measured {
			// No rate yet (a first report): a share of what is left,
			// spread over the window, until the next report tells.
			want = float64(share)
		}
		surplus := max(float64(w.charged)-w.committed, 0)
		extra := math.Ceil(max(min(want, float64(share))-surplus, 0))
		return verdict{grant: true, fresh: true, extra: uint64(extra)}
	}
	short := want - w.ahead(now, s.margin)
	if short < max(1, 0.05*want) {
		return verdict{}
	}
	return verdict{grant: true, extra: uint64(math.Ceil(min(short, float64(share))))}
}

// share is the most one grant may take of rest, what the counters have
// left: RLQS_FRACTION of it, at least one hit, at most RLQS_MAX_BLOCK.
func (b *bucket) share(rest uint64, s settings) uint64 {
	n := uint64(math.Ceil(float64(rest) * s.fraction))
	return max(min(n, rest, s.maxBlock), 1)
}

// limit is the least limit of the bucket's counters.
func (b *bucket) limit() uint64 {
	n := uint64(math.MaxUint64)
	for _, ct := range b.tgt.counters {
		n = min(n, ct.limit.Requests)
	}
	return n
}

// starting reports whether the counters' windows all began less than d
// ago (or are unseen: none began for this replica yet).
func (b *bucket) starting(now time.Time, known func(string) (span, bool), d time.Duration) bool {
	for _, ct := range b.tgt.counters {
		sp, ok := known(ct.key)
		if ok && sp.end.Sub(now) < windowLength(ct.limit.Calendar, int64(ct.limit.Period/algorithms.Month), ct.limit.Period)-d {
			return false
		}
	}
	return true
}

// rest is the least any of the bucket's counters had left when last seen
// in this window (its limit if unseen); spent says a fixed window had
// nothing left.
func (b *bucket) rest(known func(string) (span, bool)) (uint64, bool) {
	rest := uint64(math.MaxUint64)
	for _, ct := range b.tgt.counters {
		r := ct.limit.Requests
		if sp, ok := known(ct.key); ok {
			if sp.remaining == 0 && !sp.sliding {
				return 0, true
			}
			r = sp.remaining
		}
		rest = min(rest, r)
	}
	return rest, false
}

// timeLeft is how long the counters' current window lasts, as last seen
// (the shortest window when unseen).
func (b *bucket) timeLeft(now time.Time, known func(string) (span, bool)) time.Duration {
	if !b.win.end.IsZero() {
		return b.win.end.Sub(now)
	}
	left := time.Duration(math.MaxInt64)
	for _, ct := range b.tgt.counters {
		if sp, ok := known(ct.key); ok {
			left = min(left, sp.end.Sub(now))
		} else {
			left = min(left, ct.limit.Period)
		}
	}
	return left
}
