package rlqs

import (
	"time"
)

// timerSlack keeps a stretched grant's end and a turn's new grant just
// clear of the window's end.
const timerSlack = 10 * time.Millisecond

// stretchAt is when b's token bucket can be sent again with a TTL that
// ends just before its window does: Envoy reads TTLs in whole seconds, so
// the first TTL ends up to a second early. Zero when there is nothing to
// stretch.
//
// A stretch sent at at reaches Envoy by at+margin, which must come before
// the TTL it stretches can have run out (b.sent.expires-margin, its
// earliest end): Envoy drops a token bucket whose TTL ran out, and would
// start the same one sent again full, with tokens no ledger counted. So it
// is sent a second and the margin before the end, or, when the first TTL
// ends sooner than that allows, a second earlier, with a TTL of two
// seconds ending as close to the end.
func (b *bucket) stretchAt(margin time.Duration) time.Time {
	w := b.win
	if b.sent.strategy != tokenBucket || b.sent.stretched || w.end.IsZero() || w.maxTokens == 0 {
		return time.Time{}
	}
	if !b.sent.expires.Before(w.end.Add(-2 * timerSlack)) {
		return time.Time{} // it already ends within a few ms of that
	}
	at := w.end.Add(-margin - time.Second - timerSlack)
	if !at.Add(2 * margin).Before(b.sent.expires) {
		at = at.Add(-time.Second)
	}
	return at
}

// turnAt is when b's window has surely turned, so that a busy bucket gets
// its next window's grant without waiting for a report. Zero when b is
// idle or not served in grants.
func (b *bucket) turnAt() time.Time {
	if b.tgt.kind != kindGrants || b.win.late.IsZero() || b.rate == 0 || !b.quiet.IsZero() {
		return time.Time{}
	}
	return b.win.late.Add(timerSlack)
}

// onTimer stretches the TTLs of grants near their window's end and makes
// the next window's grants of the buckets whose window turned.
func (st *stream) onTimer() error {
	s := st.srv
	ev := &event{now: s.now()}
	for key, b := range st.buckets {
		if at := b.stretchAt(s.set.margin); !at.IsZero() && !ev.now.Before(at) {
			st.stretch(ev, b)
		}
		if at := b.turnAt(); !at.IsZero() && !ev.now.Before(at) {
			b.roll(ev.now, b.seen)
			st.plan(ev, key, b, true)
		}
	}
	return st.run(ev)
}

// stretch sends b's token bucket again, unchanged (Envoy keeps its tokens),
// with the TTL that ends closest to the window's end, if that ends later
// than the TTL in force and, sent now, reaches Envoy before that one can
// have run out (see stretchAt; a late timer may find it too late).
func (st *stream) stretch(ev *event, b *bucket) {
	b.sent.stretched = true
	margin := st.srv.set.margin
	ttl := ttlSeconds(b.win.end.Sub(ev.now) - margin)
	if ttl < 1 || !ev.now.Add(2*margin).Before(b.sent.expires) ||
		!ev.now.Add(time.Duration(ttl)*time.Second+margin).After(b.sent.expires) {
		return
	}
	st.assign(ev, b, b.sent, ttl)
}

// schedule arms the timer for the stream's next stretch or turn.
func (st *stream) schedule() {
	var next time.Time
	margin := st.srv.set.margin
	for _, b := range st.buckets {
		for _, at := range []time.Time{b.stretchAt(margin), b.turnAt()} {
			if !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
	}
	if next.Equal(st.timerAt) {
		return
	}
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	st.timerAt = next
	if next.IsZero() {
		return
	}
	st.timer = st.srv.set.clock.AfterFunc(max(next.Sub(st.srv.now()), 0), st.fire)
}

// fire wakes the stream's loop (at most one wake waits).
func (st *stream) fire() {
	st.srv.stats.pending.Add(1)
	select {
	case st.wake <- struct{}{}:
	default:
		st.srv.stats.pending.Add(-1)
	}
}

// onReload re-maps every bucket under the configuration now in force. A
// bucket whose rule (or its counters) changed gets its new assignment at
// once: a fresh grant under the new limits, a blanket rule, or an abandon
// when no grant can serve it any more (Envoy falls back to its
// no_assignment_behavior and subscribes again at its next request).
func (st *stream) onReload() error {
	s := st.srv
	cfg, gen, _ := s.config()
	defer st.gen.Store(gen)
	if cfg == st.cfg {
		return nil
	}
	st.cfg = cfg
	if st.domain == "" {
		return nil
	}
	ev := &event{now: s.now()}
	for key, b := range st.buckets {
		t := resolve(cfg, st.domain, b.values(), s.set.keys, s.set.shadow)
		if t.same(b.tgt) {
			b.tgt.rule = t.rule
			continue
		}
		// Envoy may still hold the old rule's token bucket: a grant
		// replacing it starts from what that one holds.
		b.foreign = b.holds(ev.now, s.set.margin)
		b.tgt, b.win = t, window{}
		b.sent.expires = time.Time{}
		if t.kind == kindUnserved {
			s.warnUnserved(b)
			st.abandon(ev, key, b)
			continue
		}
		st.plan(ev, key, b, true)
	}
	return st.run(ev)
}
