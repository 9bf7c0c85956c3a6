package rlqs

import (
	"context"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// run makes ev's store call, if it has ops, then sends its actions.
func (st *stream) run(ev *event) error {
	if len(ev.reqs) > 0 {
		if again := st.charge(ev); again != nil {
			st.charge(again)
			ev.actions = append(ev.actions, again.actions...)
		}
	}
	return st.send(ev.actions)
}

// charge takes every block and records every usage of ev in one store
// call (one round trip per Cluster slot group), then settles each part.
// A failed call is never retried: after a timeout the blocks may have
// been charged (under-admission), and the next report asks again.
//
// It returns the blocks to ask again, smaller: those that did not fit a
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
		n := len(p.b.tgt.counters)
		if p.usage > 0 {
			p.b.win.recorded = satAdd(p.b.win.recorded, p.usage)
			s.stats.recorded.Add(p.usage)
			if p.block == 0 {
				st.learn(p.b, results[p.first:p.first+n], sent, got)
			}
		}
		if p.block == 0 {
			continue
		}
		at := p.first
		if p.usage > 0 {
			at += n
		}
		if size := st.settle(ev, p, results[at:at+n], byKey, sent, got); size > 0 && !ev.retry {
			if again == nil {
				again = &event{now: got, retry: true}
			}
			again.add(p.b, 0, size)
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

// settle turns p's Spare ops into a block for Envoy when every counter
// had room for it. Otherwise the counters that had room give the block
// back (a multi-limit rule near one of its limits), a spent fixed window
// denies until it ends, and a counter with fewer hits left than asked
// returns the smaller block to ask for instead (0: none).
func (st *stream) settle(ev *event, p *part, res []store.Result, charges map[string]store.Charge, sent, got time.Time) uint64 {
	b, s := p.b, st.srv
	end, late, sliding, spent := st.learn(b, res, sent, got)
	if !allAllowed(res) {
		var fitting []store.Charge
		lost := false
		for i, c := range b.tgt.counters {
			ch, ok := charges[c.key]
			switch {
			case res[i].Allowed && ok:
				// The block, never more than the store applied there.
				ch.Applied = min(ch.Applied, p.block)
				fitting = append(fitting, ch)
			case res[i].Allowed:
				// No charge to give back (usage in the same call
				// absorbed it): the block lapses.
				lost = true
			}
		}
		if lost {
			s.stats.lapsed.Add(p.block)
		}
		st.giveBack(fitting, p.block)
		if spent {
			b.win.end, b.win.late, b.win.sliding = end, late, sliding
			st.deny(ev, b, func(string) (span, bool) { return span{}, false })
			return 0
		}
		if rest, _ := b.rest(func(k string) (span, bool) { return s.spans.get(k, got) }); rest > 0 && len(fitting) == 0 && !lost {
			if size := min(p.block-1, b.capacity(rest, s.set)); size > 0 {
				return size
			}
		}
		return 0
	}
	w := &b.win
	w.end, w.late, w.sliding = end, late, sliding
	w.granted = satAdd(w.granted, p.block)
	w.block, w.used, w.full = p.block, 0, false
	s.stats.granted.Add(p.block)
	ttl := ttlSeconds(end.Sub(got) - s.set.margin)
	if ttl < 1 {
		// The window ends before a whole-second TTL would: the block
		// lapses with it.
		s.stats.lapsed.Add(p.block)
		w.block = 0
		return 0
	}
	a := assignment{
		strategy:  tokenBucket,
		maxTokens: uint32(min(p.block, math.MaxUint32)),
		fill:      fillSeconds(b.longestPeriod()),
		nanos:     s.nanos(b.sent.nanos),
	}
	st.assign(ev, b, a, ttl)
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

// giveBack returns a block that only some counters of a rule had room
// for. It is the one case of a second store call for one report; a failed
// return leaves the hits charged (under-admission).
func (st *stream) giveBack(charges []store.Charge, block uint64) {
	if len(charges) == 0 {
		return
	}
	s := st.srv
	ctx, cancel := context.WithTimeout(context.Background(), s.set.timeout)
	defer cancel()
	s.stats.calls.Add(1)
	if err := s.lender.Return(ctx, charges); err != nil {
		s.stats.storeErrors.Add(1)
		s.stats.lapsed.Add(block)
		s.logStoreError(err)
		return
	}
	s.stats.returned.Add(block)
}

// storeFailed is a part whose store call failed. A bucket whose Envoy
// still holds an unused block keeps it; one that needs a block gets what
// its rule's on_store_error says (the store's breaker fails calls at once
// while it is open): allow or deny for two reporting intervals, or
// nothing for unavailable (Envoy's expired_assignment_behavior decides).
// Usage not recorded stays due: the next call records it.
func (st *stream) storeFailed(ev *event, p *part) {
	b := p.b
	if p.block == 0 || (b.win.block > 0 && b.win.used < b.win.block) {
		return
	}
	ttl := ceilSeconds(2 * st.srv.set.interval)
	switch b.tgt.onError {
	case config.StoreErrorAllow:
		st.assign(ev, b, assignment{strategy: allowAll}, ttl)
	case config.StoreErrorDeny:
		st.assign(ev, b, assignment{strategy: denyAll}, ttl)
	}
}

// logStoreError logs a store failure at most once a second.
func (s *Server) logStoreError(err error) {
	now := s.now()
	s.mu.Lock()
	due := now.Sub(s.lastErrLog) >= time.Second
	if due {
		s.lastErrLog = now
	}
	s.mu.Unlock()
	if due {
		s.set.log.Warn("rlqs: the store failed; buckets that need a block get their rules' on_store_error", zap.Error(err))
	}
}

// warnUnserved logs, once per rule, a bucket whose rule cannot be handed
// out in blocks.
func (s *Server) warnUnserved(b *bucket) {
	if b.tgt.kind != kindUnserved || b.tgt.rule == nil {
		return
	}
	s.mu.Lock()
	seen := s.warned[b.tgt.rule.Source]
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	s.warned[b.tgt.rule.Source] = true
	s.mu.Unlock()
	if seen {
		return
	}
	var algs []string
	for _, r := range b.tgt.rule.Limits() {
		algs = append(algs, r.Limit.Algorithm.String())
	}
	s.set.log.Warn("rlqs: a bucket matches a rule that cannot be handed out in blocks (only fixed_window and sliding_window without lease: false can); Envoy keeps its no_assignment_behavior",
		zap.String("rule", b.tgt.rule.StatKey), zap.String("source", b.tgt.rule.Source), zap.Strings("algorithms", algs))
}
