package rlqs

import (
	"math"
	"strconv"
	"strings"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/ratelimitd/ratelimitd/internal/satmath"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// bucket is one BucketId of one stream: what it maps to, how busy Envoy
// says it is, its ledger in the counters' current window and what Envoy
// was last told. It is kept small: a server holds up to maxBuckets.
type bucket struct {
	key string // bucketKey of the BucketId's pairs (values rebuilds them)
	tgt target

	seen     time.Time // last report
	rate     float64   // requests reported (allowed + denied) per second
	admits   float64   // requests reported allowed per second, last report
	quiet    time.Time // first of the current run of empty reports; zero while busy
	measured bool      // rate comes from two reports, not from a first one
	limited  bool      // the last report had denied requests

	win      window
	sent     assignment
	lastCall time.Time // last store call for the bucket
	// foreign: Envoy may hold a token bucket another stream assigned
	// (a replica that died, a stream that broke), valid until its window
	// ends: never wiped by DENY_ALL, and charged as a fresh one if
	// replaced.
	foreign bool
}

// id is the bucket's BucketId for an action.
func (b *bucket) id() *rlqsv3.BucketId { return &rlqsv3.BucketId{Bucket: b.values()} }

// values are the BucketId's pairs, read back from its key.
func (b *bucket) values() map[string]string {
	m := map[string]string{}
	for rest := b.key; rest != ""; {
		var k, v string
		k, rest = cutField(rest)
		v, rest = cutField(rest)
		m[k] = v
	}
	return m
}

// cutField reads one length-prefixed string of a bucketKey.
func cutField(s string) (field, rest string) {
	colon := strings.IndexByte(s, ':')
	n, _ := strconv.Atoi(s[:colon])
	return s[colon+1 : colon+1+n], s[colon+1+n:]
}

// observe takes one report of the bucket, received at now.
func (b *bucket) observe(now time.Time, allowed, denied uint64, interval time.Duration) {
	n := float64(satmath.Add(allowed, denied))
	prev := b.seen
	if b.seen.IsZero() {
		// The first report comes as the bucket's first request arrives (or
		// as a stream taken over reports it): it carries no rate yet.
		b.rate = n / interval.Seconds()
		b.admits = float64(allowed) / interval.Seconds()
	} else {
		dt := max(now.Sub(b.seen), interval/2).Seconds()
		r := n / dt
		b.admits = float64(allowed) / dt
		// Up at once, down by halves.
		b.rate = max(r, (b.rate+r)/2)
		b.measured = true
	}
	b.seen = now
	b.limited = denied > 0
	switch {
	case n > 0:
		b.quiet = time.Time{}
	case b.quiet.IsZero():
		b.quiet = now
	}
	b.roll(now, prev)
	// Requests the last window's grants admitted before it ended come in
	// the reports after it: they are that window's.
	late := min(allowed, b.win.carry)
	b.win.carry -= late
	allowed -= late
	b.win.allowed = satmath.Add(b.win.allowed, allowed)
	b.win.spend(now, allowed)
}

// roll starts a new ledger once the window ended, carrying what its
// grants may have admitted since the last report (prev) before it ended.
func (b *bucket) roll(now, prev time.Time) {
	w := b.win
	if w.end.IsZero() || now.Before(w.end) {
		return
	}
	var tail uint64
	if !prev.IsZero() && prev.Before(w.end) {
		tail = uint64(math.Ceil(b.rate * w.end.Sub(prev).Seconds()))
	}
	b.win = window{carry: min(w.charged-min(w.allowed, w.charged), tail)}
	// Every grant of this stream and any other ended with the window.
	b.foreign = false
}

// idleFor reports whether the bucket reported no request for d.
func (b *bucket) idleFor(now time.Time, d time.Duration) bool {
	return !b.quiet.IsZero() && now.Sub(b.quiet) >= d
}

// unrecorded is what Envoy reported allowed beyond what the store counted
// for it: beyond its grants (requests admitted under a no-assignment or
// expired-assignment behavior, or while the store was down), or every
// allowed request of a shadow bucket. Usage reported after the fact is
// always recorded.
func (b *bucket) unrecorded() uint64 {
	w := b.win
	covered := satmath.Add(w.recorded, w.charged)
	if b.tgt.kind == kindShadow {
		covered = w.recorded
	}
	if w.allowed <= covered || b.foreign {
		// A foreign grant's requests were charged by the stream that
		// assigned it.
		return 0
	}
	return w.allowed - covered
}

// holds reports whether Envoy surely holds a token bucket of this window
// now: one this stream sent whose TTL cannot have run out yet (it runs
// from the grant's arrival, up to margin after it was sent), or a foreign
// one. One that may have run out may be gone, and a grant after it start
// full.
func (b *bucket) holds(now time.Time, margin time.Duration) bool {
	if b.foreign {
		return true
	}
	return b.sent.strategy == tokenBucket && b.win.maxTokens > 0 && now.Before(b.sent.expires.Add(-margin))
}

// horizon is the longest a window of the bucket's limits can last:
// calendar months count 31 days each.
func (b *bucket) horizon() time.Duration {
	var p time.Duration
	for _, ct := range b.tgt.counters {
		p = max(p, windowLength(ct.limit.Calendar, int64(ct.limit.Period/algorithms.Month), ct.limit.Period))
	}
	return p
}

// windowLength is the longest one window lasts: period, or n calendar
// months of up to 31 days.
func windowLength(calendar bool, months int64, period time.Duration) time.Duration {
	if calendar {
		return time.Duration(months) * 31 * 24 * time.Hour
	}
	return period
}
