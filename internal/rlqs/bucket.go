package rlqs

import (
	"math"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// bucket is one BucketId of one stream: what it maps to, how busy Envoy
// says it is, its ledger in the counters' current window and what Envoy
// was last told.
type bucket struct {
	id     *rlqsv3.BucketId
	values map[string]string
	tgt    target
	cfg    *config.Config // tgt was resolved under it

	seen  time.Time // last report
	rate  float64   // requests reported (allowed + denied) per second
	quiet time.Time // first of the current run of empty reports; zero while busy

	win      window
	sent     assignment
	lastCall time.Time // last store call for the bucket
}

// window is a bucket's ledger in its counters' current window. Every hit
// Envoy may admit from a token bucket was charged in the store first
// (granted); the blocks of one window expire before it ends.
type window struct {
	// end and late are the window's end read before and after the store
	// call that told it (zero until one did): blocks expire by end; by
	// late the next window has begun.
	end, late time.Time
	sliding   bool
	granted   uint64 // hits of the blocks charged in this window
	allowed   uint64 // requests Envoy reported allowed in this window
	recorded  uint64 // of those, recorded as usage: admitted beyond the blocks
	block     uint64 // the current block's size; 0: none
	used      uint64 // allowed reported since the current block was sent
	full      bool   // the counter had no room: deny until the window ends
	// carry is what the last window's blocks held unreported when it
	// ended: the first reports after it are that window's up to carry.
	// (This decides only what is recorded as usage and when a block is
	// used up: every block is charged before Envoy gets it, whatever the
	// reports say.)
	carry uint64
}

// observe takes one report of the bucket, received at now.
func (b *bucket) observe(now time.Time, allowed, denied uint64, interval time.Duration) {
	n := float64(satAdd(allowed, denied))
	prev := b.seen
	if b.seen.IsZero() {
		// The first report comes as the bucket's first request arrives:
		// it carries no rate yet.
		b.rate = n / interval.Seconds()
	} else {
		dt := max(now.Sub(b.seen), interval/2).Seconds()
		r := n / dt
		// Up at once, down by halves.
		b.rate = max(r, (b.rate+r)/2)
	}
	b.seen = now
	switch {
	case n > 0:
		b.quiet = time.Time{}
	case b.quiet.IsZero():
		b.quiet = now
	}
	b.roll(now, prev)
	// Requests the last window's blocks admitted before it ended come in
	// the reports after it: they are that window's.
	late := min(allowed, b.win.carry)
	b.win.carry -= late
	allowed -= late
	b.win.allowed = satAdd(b.win.allowed, allowed)
	if b.win.block > 0 {
		b.win.used = satAdd(b.win.used, allowed)
	}
}

// roll starts a new ledger once the window ended, carrying what its
// blocks may have admitted since the last report (prev) before it ended.
func (b *bucket) roll(now, prev time.Time) {
	w := b.win
	if w.end.IsZero() || now.Before(w.end) {
		return
	}
	var tail uint64
	if !prev.IsZero() && prev.Before(w.end) {
		tail = uint64(math.Ceil(b.rate * w.end.Sub(prev).Seconds()))
	}
	b.win = window{carry: min(w.granted-min(w.allowed, w.granted), tail)}
}

// idleFor reports whether the bucket reported no request for d.
func (b *bucket) idleFor(now time.Time, d time.Duration) bool {
	return !b.quiet.IsZero() && now.Sub(b.quiet) >= d
}

// unrecorded is what Envoy reported allowed beyond what the store counted
// for it: beyond its blocks (requests admitted under a no-assignment or
// expired-assignment behavior, or while the store was down), or every
// allowed request of a shadow bucket. Usage reported after the fact is
// always recorded.
func (b *bucket) unrecorded() uint64 {
	w := b.win
	covered := satAdd(w.recorded, w.granted)
	if b.tgt.kind == kindShadow {
		covered = w.recorded
	}
	if w.allowed <= covered {
		return 0
	}
	return w.allowed - covered
}

// verdict is what a bucket of window limits needs now.
type verdict struct {
	block uint64 // hits of a block to take; 0: none
	deny  bool   // the counter is spent until the window ends
}

// plan decides whether the bucket needs a new block: it has none in this
// window, or has used it up, or (far from the limit only) will before the
// next report. A block is sized for the rest of the window at the rate
// Envoy reports, but at most a fraction of what the counters had left:
// near the limit blocks shrink, and a replaced block's unused hits are
// lost, so near it only a used-up block is replaced. known reads what the
// replica last learned of a counter. turn says the window just turned
// (no spacing between store calls applies).
func (b *bucket) plan(now time.Time, s settings, known func(string) (span, bool), turn bool) verdict {
	w := &b.win
	needs := w.block == 0 || w.used >= w.block
	if needs && w.full && !w.sliding && now.Before(w.end) {
		return verdict{deny: true}
	}
	rest, spent := b.rest(known)
	if spent {
		// Deny once Envoy has used what it holds.
		return verdict{deny: needs}
	}
	left := b.timeLeft(now, known)
	if left < time.Second+s.margin {
		// Too late in the window for a whole-second TTL to end in it.
		return verdict{}
	}
	if !turn && !b.lastCall.IsZero() && now.Sub(b.lastCall) < s.interval/2 {
		return verdict{}
	}
	desired := b.desired(left, s)
	size := min(desired, b.capacity(rest, s))
	switch {
	case needs:
		return verdict{block: size}
	case size == desired && float64(w.used)+1.5*b.rate*s.interval.Seconds() >= float64(w.block):
		return verdict{block: size}
	}
	return verdict{}
}

// desired is a block for the rest of the window (at least one reporting
// interval) at the reported rate, with a tenth of headroom and one hit.
func (b *bucket) desired(left time.Duration, s settings) uint64 {
	secs := max(left, s.interval).Seconds()
	n := math.Ceil(b.rate*secs*1.1) + 1
	if n >= float64(s.maxBlock) {
		return s.maxBlock
	}
	return uint64(n)
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

// capacity is the largest block what the counters have left allows: a
// fraction of it, so that Envoys share it, but at least a reporting
// interval of this Envoy's requests while that much is left (near the
// limit, a block used up waits for the next report), and at least 1.
func (b *bucket) capacity(rest uint64, s settings) uint64 {
	share := uint64(float64(rest) * s.fraction)
	interval := uint64(math.Ceil(b.rate*s.interval.Seconds())) + 1
	return max(min(max(share, min(interval, rest)), s.maxBlock), 1)
}

// timeLeft is how long the counters' current window lasts, as last seen
// (the shortest period when unseen).
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

// longestPeriod is the longest window of the bucket's limits.
func (b *bucket) longestPeriod() time.Duration {
	var p time.Duration
	for _, ct := range b.tgt.counters {
		p = max(p, ct.limit.Period)
	}
	return p
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
