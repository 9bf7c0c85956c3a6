package rlqs

import (
	"context"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/satmath"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// run makes ev's store calls (one per chunk of maxCallOps ops), sending
// each chunk's grants as it is settled, then ev's other actions.
func (st *stream) run(ev *event) error {
	for _, c := range ev.chunks() {
		if len(c.reqs) == 0 {
			for _, p := range c.parts {
				st.settle(c, p, nil, nil, ev.now, ev.now)
			}
		} else if again := st.charge(c); again != nil {
			st.charge(again)
			c.actions = append(c.actions, again.actions...)
		}
		if err := st.send(c.actions); err != nil {
			return err
		}
	}
	return st.send(ev.actions)
}

// charge takes every grant's hits and records every usage of ev in one
// store call (one round trip per Cluster slot group), then settles each
// part. A failed call is never retried: after a timeout the hits may have
// been charged (under-admission), and the next report asks again.
//
// It returns the grants to ask again, smaller: those that did not fit a
// counter that has fewer hits left than was known. That second call is
// made only near the limit, and only once: otherwise their Envoys would
// wait a reporting interval for hits that are there.
func (st *stream) charge(ev *event) (again *event) {
	s := st.srv
	sent := s.now()
	ctx, cancel := context.WithTimeout(context.Background(), s.set.timeout)
	results, charges, err := s.lender.TakeCharged(ctx, ev.reqs)
	cancel()
	got := s.now()
	s.stats.calls.Add(1)
	for _, p := range ev.parts {
		p.b.lastCall = sent
	}
	if err != nil {
		s.stats.storeErrors.Add(1)
		s.logStoreError(err)
		for _, p := range ev.parts {
			st.storeFailed(ev, p)
		}
		return nil
	}
	byKey := make(map[string]store.Charge, len(charges))
	for _, c := range charges {
		byKey[c.Key] = c
	}
	ev.now = got
	for _, p := range ev.parts {
		res := results[p.first-ev.base : p.first-ev.base+p.ops]
		if size := st.settle(ev, p, res, byKey, sent, got); size > 0 && !ev.retry {
			if again == nil {
				again = &event{now: got, retry: true}
			}
			v := p.v
			v.extra = size
			again.add(p.b, 0, v)
		}
	}
	return again
}

// learn keeps what the decisions of b's counters (asked at sent, answered
// at got) told of their windows, for every stream of the replica.
func (st *stream) learn(b *bucket, res []store.Result, sent, got time.Time) (end, late time.Time, sliding, spent bool) {
	for i, c := range b.tgt.counters {
		sp := spanOf(c.limit, res[i].Decision, sent, got)
		st.srv.spans.put(c.key, sp, got)
		if end.IsZero() || sp.end.Before(end) {
			end, late = sp.end, sp.late
		}
		sliding = sliding || sp.sliding
		spent = spent || (sp.remaining == 0 && !sp.sliding && !res[i].Allowed)
	}
	return end, late, sliding, spent
}

// settle records p's usage, then turns its Spare ops into a grant when
// every counter had room for them. Otherwise the counters that had room
// give the hits back (a multi-limit rule near one of its limits), a spent
// fixed window denies until it ends (unless Envoy holds a grant), and a
// counter with fewer hits left than asked returns the smaller number to
// ask for instead (0: none).
func (st *stream) settle(ev *event, p *part, res []store.Result, charges map[string]store.Charge, sent, got time.Time) uint64 {
	b, s := p.b, st.srv
	n := len(b.tgt.counters)
	if p.usage > 0 {
		b.win.recorded = satmath.Add(b.win.recorded, p.usage)
		s.stats.recorded.Add(p.usage)
		if p.ops == n {
			st.learn(b, res, sent, got)
		}
		res = res[min(n, len(res)):]
	}
	if p.v.peek && len(res) == n {
		end, late, sliding, _ := st.learn(b, res, sent, got)
		w := &b.win
		w.end, w.late, w.sliding = end, late, sliding
		return 0
	}
	if !p.v.grant {
		return 0
	}
	if p.v.extra > 0 {
		end, late, sliding, spent := st.learn(b, res, sent, got)
		w := &b.win
		if w.end.IsZero() || end.Before(w.end) {
			w.end, w.late = end, late
		}
		w.sliding = sliding
		if !allAllowed(res) {
			return st.unfit(ev, p, res, charges, spent, got)
		}
		w.charged = satmath.Add(w.charged, p.v.extra)
		s.stats.granted.Add(p.v.extra)
	}
	st.issue(ev, b, p.v.fresh)
	return 0
}

// unfit handles a grant's Spare ops not all of which fitted (see settle).
func (st *stream) unfit(ev *event, p *part, res []store.Result, charges map[string]store.Charge, spent bool, got time.Time) uint64 {
	b, s := p.b, st.srv
	var fitting []store.Charge
	lost := false
	for i, c := range b.tgt.counters {
		ch, ok := charges[c.key]
		switch {
		case res[i].Allowed && ok:
			// The hits asked for, never more than the store applied there.
			ch.Applied = min(ch.Applied, p.v.extra)
			fitting = append(fitting, ch)
		case res[i].Allowed:
			// No charge to give back (usage in the same call absorbed
			// it): the hits lapse.
			lost = true
		}
	}
	if lost {
		s.stats.lapsed.Add(p.v.extra)
	}
	st.giveBack(fitting, p.v.extra)
	if b.foreign {
		// A grant to replace another stream's is worth it only as asked:
		// Envoy keeps that one.
		return 0
	}
	known := func(k string) (span, bool) { return s.spans.get(k, got) }
	if spent {
		st.deny(ev, b, known)
		return 0
	}
	if rest, _ := b.rest(known); rest > 0 && len(fitting) == 0 && !lost && p.v.extra > 1 {
		return min(p.v.extra-1, b.share(rest, s.set))
	}
	return 0
}

// allAllowed reports whether every op of res was allowed.
func allAllowed(res []store.Result) bool {
	for _, r := range res {
		if !r.Allowed {
			return false
		}
	}
	return true
}

// giveBack returns hits that only some counters of a rule had room for.
// It is the one case of a second store call for one report; a failed
// return leaves the hits charged (under-admission).
func (st *stream) giveBack(charges []store.Charge, hits uint64) {
	if len(charges) == 0 {
		return
	}
	s := st.srv
	ctx, cancel := context.WithTimeout(context.Background(), s.set.timeout)
	defer cancel()
	s.stats.calls.Add(1)
	if err := s.lender.Return(ctx, charges); err != nil {
		s.stats.storeErrors.Add(1)
		s.stats.lapsed.Add(hits)
		s.logStoreError(err)
		return
	}
	s.stats.returned.Add(hits)
}
