package fallback

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

const (
	// callTimeout bounds one reconcile call or beat of the loop.
	callTimeout = time.Second
	// passWorkers charge counters at once; a pass stops after
	// passFailures failed calls and no answer (the backend still down).
	passWorkers  = 8
	passFailures = 8
	// rounds is how many charges one counter gets in a pass: the first,
	// and those of hits admitted here while it was on its way.
	rounds = 3
)

// loop beats and reconciles until Close: a pass every interval while
// counters are decided here, a beat every heartbeat otherwise.
func (s *Store) loop() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(s.opts.interval)
	defer t.Stop()
	_ = s.Beat(ctx)
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if s.active.Load() > 0 {
			s.Reconcile(ctx)
			continue
		}
		s.mu.Lock()
		due := !s.now().Before(s.members.beatAt.Add(s.opts.heartbeat))
		s.mu.Unlock()
		if due {
			_ = s.Beat(ctx)
		}
	}
}

// Reconcile charges the backend with the hits admitted here, counter by
// counter, and returns how many counters are still decided here. It beats
// first, so that a backend that lost its data (another epoch) also gets
// back what it had counted before the outage (each entry's seed), and so
// that counters are handed back to the backend only once no replica is
// still local: until then the backend's counts lack the other replicas'
// hits, and a replica deciding there would admit them again.
func (s *Store) Reconcile(ctx context.Context) int {
	if s.active.Load() == 0 {
		return 0
	}
	release := true
	if s.opts.presence != nil {
		err := s.Beat(ctx)
		s.mu.Lock()
		release = (err == nil && s.releasable()) || s.presenceLost()
		s.mu.Unlock()
	}
	s.mu.Lock()
	keys := make([]string, 0, len(s.entries))
	for k := range s.entries { // map order: no counter always waits last
		keys = append(keys, k)
	}
	s.mu.Unlock()
	var failed, answered atomic.Int64
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(passWorkers, len(keys)) {
		wg.Go(func() {
			for k := range work {
				if s.reconcileKey(ctx, k, release) {
					answered.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	for _, k := range keys {
		if ctx.Err() != nil || (failed.Load() >= passFailures && answered.Load() == 0) {
			break
		}
		work <- k
	}
	close(work)
	wg.Wait()
	return int(s.active.Load())
}

// reconcileKey charges key's pending hits, and hands key back to the
// backend when release allows; false if the backend failed.
func (s *Store) reconcileKey(ctx context.Context, key string, release bool) bool {
	for range rounds {
		e, reqs, c, ok := s.nextCharge(key, release)
		if !ok {
			return true
		}
		ticket := s.seen.ticket()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := s.next.Take(cctx, reqs)
		cancel()
		if err == nil && len(res) != len(reqs) {
			err = fmt.Errorf("fallback: %d results for a charge of %d requests", len(res), len(reqs))
		}
		if err != nil {
			s.unconfirm(key, e)
			return false
		}
		s.settle(key, e, c, release, res[len(res)-1], ticket)
	}
	return true
}

// nextCharge is the call that charges key next: the charge in flight
// again, as it was, if its outcome is unknown; else what is pending now,
// with the seed if the backend lost its data. Hits whose window ended are
// dropped instead. Nothing to charge is a check, which tells the backend
// answers for key again (none once it has, until release). ok is false
// when there is no call to make; e is the entry the call is for.
func (s *Store) nextCharge(key string, release bool) (e *entry, reqs []store.Request, c charge, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok = s.entries[key]
	if !ok {
		return nil, nil, charge{}, false
	}
	now := s.now()
	if e.inflight.seq != 0 {
		if now.Before(e.inflight.until) {
			return e, s.chargeRequests(key, e, e.inflight, now), e.inflight, true
		}
		// Its window ended: whether it ran no longer matters.
		s.drop(key, e.inflight.pending)
		e.inflight = charge{}
	}
	if !now.Before(e.until) && e.pending > 0 {
		s.drop(key, e.pending)
		e.pending = 0
		e.gen++
	}
	c = charge{pending: e.pending, gen: e.gen, until: e.until}
	if e.seed > 0 && e.epoch != "" && s.members.Epoch != e.epoch && now.Before(e.seedUntil) {
		c.seed = e.seed
		c.until = later(c.until, e.seedUntil)
	}
	if c.hits() > 0 {
		s.charges++
		c.seq = s.charges
		e.inflight = c
	} else if e.confirmed {
		if release {
			s.remove(key)
		}
		return nil, nil, charge{}, false
	}
	return e, s.chargeRequests(key, e, c, now), c, true
}

// chargeRequests is charge c of key as one batch: a marker the batch takes
// the only token of, then the hits as a shadow request, which an admitted
// batch records in full, past the limit too, as usage. Sent again after an
// unknown outcome, the batch finds the marker taken and is denied, so the
// hits are charged at most once (usage would be recorded even then). The
// marker shares the counter's hash tag, lasts until the charge no longer
// matters and is no key a rule builds. Nothing to charge is a check.
func (s *Store) chargeRequests(key string, e *entry, c charge, now time.Time) []store.Request {
	if c.hits() == 0 {
		return []store.Request{{Key: key, Limit: e.limit, Mode: algorithms.Enforce}}
	}
	period := max(c.until.Sub(now).Round(time.Second)+time.Second, time.Second)
	marker := "rc:" + key + ":" + s.opts.id + ":" + strconv.FormatUint(c.seq, 10)
	return []store.Request{
		{Key: marker, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Period: period}, Hits: 1, Mode: algorithms.Enforce},
		{Key: key, Limit: e.limit, Hits: c.hits(), Mode: algorithms.Shadow},
	}
}

// settle records that the backend took charge c of key's entry e (or
// answered its check), and what it said of key's counter, res; with
// release, key goes back to the backend once nothing is pending. An entry
// forgotten (and made again) meanwhile is not e: the charge says nothing
// of the new one's hits.
func (s *Store) settle(key string, e *entry, c charge, release bool, res store.Result, ticket uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries[key] != e {
		return
	}
	// What a counter going local again starts from: without it, its last
	// answer would predate the hits charged since, and it would admit them
	// again.
	s.seen.keep(key, res, s.now(), ticket)
	if c.seq != 0 && c.seq == e.inflight.seq {
		if c.gen == e.gen {
			e.pending -= min(e.pending, c.pending)
		}
		if c.seed > 0 {
			e.seed = 0
		}
		e.inflight = charge{}
		s.reconciled.Add(c.hits())
		if s.opts.reconciled != nil {
			s.opts.reconciled(key, c.hits())
		}
	}
	e.confirmed = true
	if release && e.pending == 0 && e.inflight.seq == 0 {
		s.remove(key)
	}
}

// unconfirm records that the backend failed key's charge: it is down
// again, as far as this replica can tell.
func (s *Store) unconfirm(key string, e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries[key] == e {
		e.confirmed = false
	}
}

// remove hands key back to the backend. mu is held.
func (s *Store) remove(key string) {
	delete(s.entries, key)
	s.active.Store(int64(len(s.entries)))
	if len(s.entries) == 0 {
		s.members.recovered = time.Time{}
	}
	_, _ = s.local.Reset(context.Background(), []string{key})
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
