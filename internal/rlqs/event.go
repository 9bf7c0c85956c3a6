package rlqs

import (
	"math"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/ratelimitd/ratelimitd/internal/satmath"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// event gathers what one report, timer or reload asks of the store (one
// call for all its buckets, chunked past maxCallOps) and tells Envoy (one
// response).
type event struct {
	now     time.Time
	retry   bool // a second call for grants that did not fit (stream.charge)
	base    int  // where reqs start in the event it is a chunk of
	reqs    []store.Request
	parts   []*part
	actions []*rlqsv3.RateLimitQuotaResponse_BucketAction
	// reserved is what this event's Spare ops ask of each counter, so
	// that the buckets planned after them see what will be left.
	reserved map[string]uint64
}

// part is one bucket's share of an event: usage to record (one op per
// counter), then hits to charge for a grant (one Spare op per counter),
// or a look at the counters' window (a Spare op of no hits).
type part struct {
	b     *bucket
	usage uint64
	v     verdict
	first int // index of its first op in the reqs it was added to (a chunk starts at base)
	ops   int
}

// add queues b's ops for usage and v.
func (ev *event) add(b *bucket, usage uint64, v verdict) {
	if (usage == 0 && !v.grant && !v.peek) || len(b.tgt.counters) == 0 {
		return
	}
	p := &part{b: b, usage: usage, v: v, first: len(ev.reqs)}
	if usage > 0 {
		for _, c := range b.tgt.counters {
			ev.reqs = append(ev.reqs, store.Request{Key: c.key, Limit: c.limit, Hits: usage, Mode: algorithms.Shadow, Usage: true})
		}
	}
	if v.extra > 0 || v.peek {
		for _, c := range b.tgt.counters {
			ev.reqs = append(ev.reqs, store.Request{Key: c.key, Limit: c.limit, Hits: v.extra, Mode: algorithms.Spare})
			if v.extra > 0 {
				if ev.reserved == nil {
					ev.reserved = map[string]uint64{}
				}
				ev.reserved[c.key] = satmath.Add(ev.reserved[c.key], v.extra)
			}
		}
	}
	p.ops = len(ev.reqs) - p.first
	ev.parts = append(ev.parts, p)
}

// known is what the replica last learned of a counter, less what this
// event already asks of it.
func (ev *event) known(spans *windows) func(string) (span, bool) {
	return func(key string) (span, bool) {
		sp, ok := spans.get(key, ev.now)
		if ok {
			sp.remaining -= min(sp.remaining, ev.reserved[key])
		}
		return sp, ok
	}
}

// maxCallOps bounds the ops of one store call: a script unpacks its keys
// onto Lua's stack, which holds about 8,000.
const maxCallOps = 1024

// chunks splits ev's parts, in order, into events of at most maxCallOps
// ops each (a part's ops stay together), sharing ev's requests.
func (ev *event) chunks() []*event {
	var out []*event
	var cur *event
	for _, p := range ev.parts {
		if cur == nil || (p.ops > 0 && len(cur.reqs)+p.ops > maxCallOps) {
			cur = &event{now: ev.now, retry: ev.retry, base: p.first}
			out = append(out, cur)
		}
		cur.reqs = ev.reqs[cur.base : p.first+p.ops]
		cur.parts = append(cur.parts, p)
	}
	return out
}

// assign queues a for b with ttl whole seconds, and remembers it.
func (st *stream) assign(ev *event, b *bucket, a assignment, ttl int64) {
	a.expires = ev.now.Add(time.Duration(ttl)*time.Second + st.srv.set.margin)
	ev.actions = append(ev.actions, a.action(b.id(), ttl))
	b.sent = a
	st.srv.stats.assigned[a.strategy].Add(1)
}

// abandon tells Envoy to forget b, and forgets it.
func (st *stream) abandon(ev *event, key string, b *bucket) {
	ev.actions = append(ev.actions, abandonAction(b.id()))
	st.forget(key)
	st.srv.stats.abandoned.Add(1)
}

// plan decides what bucket b (at key) needs in ev. turn says its window
// just turned or its rule changed: a new grant is due whatever the
// spacing of store calls.
func (st *stream) plan(ev *event, key string, b *bucket, turn bool) {
	s := st.srv.set
	if b.idleFor(ev.now, s.idle()) {
		st.abandon(ev, key, b)
		return
	}
	switch b.tgt.kind {
	case kindAllow:
		st.blanket(ev, b, allowAll)
	case kindDeny:
		st.blanket(ev, b, denyAll)
	case kindShadow:
		st.blanket(ev, b, allowAll)
		ev.add(b, b.unrecorded(), verdict{})
	case kindGrants:
		st.planGrants(ev, b, turn)
	}
}

// blanket keeps a blanket assignment that only a reload changes in force:
// sent once, sent again before it expires.
func (st *stream) blanket(ev *event, b *bucket, want strategy) {
	s := st.srv.set
	if b.sent.strategy == want && b.sent.expires.Sub(ev.now) > 2*s.interval {
		return
	}
	st.assign(ev, b, assignment{strategy: want}, ttlSeconds(s.idle()))
}

// planGrants records what Envoy admitted beyond its grants, and asks for
// a grant or denies as bucket.plan says. A foreign grant adopted takes its
// window from what the replica knows of the counters, or from a look.
func (st *stream) planGrants(ev *event, b *bucket, turn bool) {
	known := ev.known(st.srv.spans)
	v := b.plan(ev.now, st.srv.set, known, turn)
	if v.deny {
		st.deny(ev, b, known)
	}
	if v.peek && b.adopt(known) {
		v.peek = false
	}
	ev.add(b, b.unrecorded(), v)
}

// adopt takes the window of a foreign grant from what is known of the
// counters; false if nothing is.
func (b *bucket) adopt(known func(string) (span, bool)) bool {
	var first span
	for i, c := range b.tgt.counters {
		sp, ok := known(c.key)
		if !ok {
			return false
		}
		if i == 0 || sp.end.Before(first.end) {
			first = sp
		}
	}
	w := &b.win
	w.end, w.late, w.sliding = first.end, first.late, first.sliding
	return len(b.tgt.counters) > 0
}

// deny assigns DENY_ALL while the counters are spent and Envoy holds no
// grant (a DENY_ALL would wipe one, charged and valid until the window
// ends): a fixed window until it ends, a sliding one for a reporting
// interval (it frees hits as it slides).
func (st *stream) deny(ev *event, b *bucket, known func(string) (span, bool)) {
	w := &b.win
	w.full = true
	if w.end.IsZero() {
		b.adopt(known)
	}
	if b.holds(ev.now, st.srv.set.margin) {
		return
	}
	if b.sent.strategy == denyAll && b.sent.expires.After(ev.now.Add(st.srv.set.interval)) {
		return
	}
	ttl := ceilSeconds(st.srv.set.interval)
	if !w.sliding && !w.end.IsZero() {
		ttl = ceilSeconds(w.end.Sub(ev.now))
	}
	st.assign(ev, b, assignment{strategy: denyAll}, ttl)
}

func ceilSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}
