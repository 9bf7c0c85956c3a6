package localcache

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// entryOverhead approximates the bytes an entry costs beyond its key: the
// map slot, the list element, the entry and the limit in its cache key.
const entryOverhead = 160

// cacheKey includes the whole limit, so a rule changed by hot reload never
// reads an entry made under the old rule.
type cacheKey struct {
	key   string
	limit algorithms.Limit
}

// entry is a backend denial known to hold, with the same numbers, until
// until. Denials are only admitted as entries when that is provable from
// the algorithm's contract (pkg/algorithms), without its state:
//
//   - fixed_window: the window's count only grows until the window ends,
//     so a denial of h hits holds for any hits >= h until the window's end,
//     with the remaining count reported then.
//   - every other algorithm: the remaining count only grows while nothing
//     is admitted, and h hits are admitted exactly when it reaches h, which
//     is RetryAfter. A denial that already reports h-1 remaining (a single
//     hit denied with nothing left, in practice) therefore holds unchanged
//     for exactly h hits until RetryAfter. Any other denial is not cached:
//     its remaining count climbs while it waits, and a cached answer would
//     report a stale one. RetryAfter Never is never cached for the same
//     reason.
//
// Only denials with nothing left (remaining 0) are cached: no replica can be
// admitted in the meantime either, so the entry is exact across replicas,
// until a refund (is_negative_hits), a Cluster undo, a lease's return or a
// reset gives the counter room back. Each is published to every replica,
// which drops its entry (Store.Invalidate), but a refund only of a counter
// with nothing left, which is why a denial with some room left (of more
// hits than that room) is not cached.
type entry struct {
	k         cacheKey
	hits      uint64 // fixed_window: the fewest hits denied; otherwise the hits denied
	remaining uint64
	until     time.Time // the denial holds before this instant
	reset     time.Time // the backend's ResetAfter, as an instant
	// stale: the entry is not answered from at or after this instant,
	// though the denial may hold (WithMaxAge: a refund whose invalidation
	// this replica missed may have lifted it). Zero: never.
	stale time.Time
	// used is the Unix second of the entry's last use (Gauges).
	used int64
}

// newEntry makes the entry for a denial of hits at now, if it is one that
// lasts (see entry).
func newEntry(k cacheKey, hits uint64, d algorithms.Decision, now time.Time) (*entry, bool) {
	if hits == 0 || d.Allowed || d.Remaining != 0 {
		// Only a counter with nothing left: a refund of it is published
		// to every replica (Invalidate), a refund of one with some room
		// left is not, and would lift a denial of more hits than that.
		return nil, false
	}
	e := &entry{k: k, hits: hits, remaining: d.Remaining, reset: now.Add(d.ResetAfter)}
	if k.limit.Algorithm == algorithms.FixedWindow {
		if d.ResetAfter <= 0 {
			return nil, false
		}
		e.until = e.reset
		return e, true
	}
	if d.Remaining+1 != hits || d.RetryAfter <= 0 || d.RetryAfter == algorithms.Never {
		return nil, false
	}
	e.until = now.Add(d.RetryAfter)
	return e, true
}

func (e *entry) size() int { return len(e.k.key) + entryOverhead }

func (e *entry) live(now time.Time) bool {
	return now.Before(e.until) && (e.stale.IsZero() || now.Before(e.stale))
}

// decide is the backend's answer to hits at now, if the entry knows it.
// The caller has checked that the entry is live.
func (e *entry) decide(hits uint64, now time.Time) (algorithms.Decision, bool) {
	d := algorithms.Decision{Remaining: e.remaining, ResetAfter: e.reset.Sub(now)}
	if e.k.limit.Algorithm == algorithms.FixedWindow {
		if hits < e.hits {
			return algorithms.Decision{}, false
		}
		d.RetryAfter = d.ResetAfter
		if hits > e.k.limit.Requests {
			d.RetryAfter = algorithms.Never
		}
		return d, true
	}
	if hits != e.hits {
		// More hits wait longer than the entry knows; fewer may fit.
		return algorithms.Decision{}, false
	}
	d.RetryAfter = e.until.Sub(now)
	return d, true
}

// merge folds a newer denial of the same key and limit into a live entry.
func (e *entry) merge(newer *entry) {
	if e.k.limit.Algorithm == algorithms.FixedWindow {
		// Same window (the entry is live): the older denial of fewer hits
		// still holds, at the newer remaining count, as the backend has
		// just confirmed.
		e.hits = min(e.hits, newer.hits)
		e.remaining, e.until, e.reset, e.stale = newer.remaining, newer.until, newer.reset, newer.stale
		return
	}
	*e = *newer
}
