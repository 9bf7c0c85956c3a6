package fallback

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// errUndecided: a request of the batch has no fallback (FallbackNone) and
// the others do not deny it, so it could go either way.
var errUndecided = errors.New("fallback: a request without a fallback leaves the batch undecided")

// errFull: WithMaxKeys counters are decided locally already; a new one
// fails as it would without the decorator, so memory stays bounded.
var errFull = errors.New("fallback: too many counters decided locally")

// entry is a counter decided in memory while the backend could not.
type entry struct {
	limit  algorithms.Limit // the rule's, as the backend counts
	scaled algorithms.Limit // this replica's share of it
	// seed is what the local count started from: this replica's share of
	// what the backend had counted, until seedUntil. It is charged back
	// only if the backend lost its data meanwhile (another epoch).
	seed      uint64
	seedUntil time.Time
	epoch     string
	// pending hits were admitted here and not yet charged to the backend;
	// they matter until until (their window's end, the bucket full again).
	pending uint64
	until   time.Time
	// gen counts the windows pending was reset for, so that a charge of
	// an ended window's hits never takes back the next window's.
	gen uint64
	// confirmed: the backend answered a charge (or check) of it since it
	// went local; it stays local until no replica is unconfirmed.
	confirmed bool
	inflight  charge
}

// charge is a reconcile call that may have run: it is sent again with the
// same marker (seq) until an answer says it ran, never as a new charge.
// seq is unique to the store (see Store.charges), never to an entry: a
// counter that goes local again must not find its new charge's marker
// taken by an old one, which would deny it and lose its hits.
type charge struct {
	seq, pending, seed, gen uint64
	until                   time.Time
}

func (c charge) hits() uint64 { return c.pending + c.seed }

// Requests standing for the fallbacks that are not decided locally: a check
// that always passes (allow, and none, which may go either way) and hits
// that never fit (deny). Neither ever writes a state; their keys are no
// key a rule builds.
const (
	allowKey = "\x00fallback:allow"
	denyKey  = "\x00fallback:deny"
)

var (
	allowLimit = algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: algorithms.MaxCount, Period: time.Second}
	denyLimit  = algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 0, Period: time.Second}
)

// decide decides reqs in memory, each Local request against this replica's
// share of its limit, all-or-nothing with the others' fallbacks. charge
// says the backend certainly took none of reqs' hits, so those admitted
// here are charged to it later; otherwise they are counted as dropped.
func (s *Store) decide(reqs []store.Request, charge bool) ([]store.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if err := s.open(reqs, now); err != nil {
		return nil, err
	}
	batch, undecided := s.substitute(reqs)
	res, err := s.local.Take(context.Background(), batch)
	if err != nil {
		return nil, fmt.Errorf("fallback: local decision: %w", err)
	}
	res = res[:len(reqs)]
	denied := store.VerdictOf(reqs, res).Denied()
	s.journal(reqs, res, denied || undecided, charge, now)
	if undecided && !denied {
		return nil, errUndecided
	}
	s.decisions.Add(1)
	return answers(reqs, res), nil
}

// open finds or makes the entry of every Local request's counter. A new one
// starts from this replica's share of what the backend last said was left
// (seen), recorded as usage before the batch.
func (s *Store) open(reqs []store.Request, now time.Time) error {
	var opened []string
	var full error
	n := s.members.divisor(s.opts.replicas)
	for _, r := range reqs {
		if r.Fallback != store.FallbackLocal {
			continue
		}
		if _, ok := s.entries[r.Key]; ok {
			continue
		}
		if len(s.entries) >= s.opts.maxKeys {
			full = errFull
			break
		}
		s.entries[r.Key] = &entry{limit: r.Limit, scaled: scale(r.Limit, n), epoch: s.members.Epoch}
		opened = append(opened, r.Key)
	}
	// Published before seen is read: a caller that still finds no entry
	// goes to the backend, so the answers seen lacks are only those of the
	// calls in flight now, however long this takes.
	s.active.Store(int64(len(s.entries)))
	if err := s.seed(opened, n, now); err != nil {
		return err
	}
	return full
}

// seed starts the new entries of keys from this replica's share of what
// the backend last said was left of their counters. mu is held.
func (s *Store) seed(keys []string, n uint64, now time.Time) error {
	var seeds []store.Request
	for _, k := range keys {
		e := s.entries[k]
		last, ok := s.seen.last(k, now)
		if !ok {
			continue
		}
		if used := e.scaled.Capacity() - share(last.remaining, e.scaled, n); used > 0 {
			e.seed, e.seedUntil = used, last.until
			seeds = append(seeds, store.Request{Key: k, Limit: e.scaled, Hits: used, Mode: algorithms.Enforce, Usage: true})
		}
	}
	if len(seeds) == 0 {
		return nil
	}
	if _, err := s.local.Take(context.Background(), seeds); err != nil {
		return fmt.Errorf("fallback: seeding %d counters: %w", len(seeds), err)
	}
	return nil
}

// substitute is reqs as the local store decides them: Local requests under
// their share, the others as checks that pass or hits that never fit, with
// their modes, so the verdict is the one their fallbacks give. A batch with
// a request that could go either way gets one more request that denies it,
// so that nothing but usage is charged: its verdict is read without it.
func (s *Store) substitute(reqs []store.Request) (batch []store.Request, undecided bool) {
	batch = make([]store.Request, len(reqs), len(reqs)+1)
	for i, r := range reqs {
		op := store.Request{Key: r.Key, Hits: r.Hits, Mode: r.Mode, Usage: r.Usage, Joined: r.Joined}
		switch {
		case r.Fallback == store.FallbackLocal:
			op.Limit = s.entries[r.Key].scaled
		case r.Fallback == store.FallbackDeny && r.Mode != algorithms.NegativeHits:
			op.Key, op.Limit, op.Hits, op.Usage = denyKey, denyLimit, 1, false
		default:
			op.Key, op.Limit, op.Hits, op.Usage = allowKey, allowLimit, 0, false
			undecided = undecided || r.Fallback == store.FallbackNone
		}
		batch[i] = op
	}
	if undecided {
		batch = append(batch, store.Request{Key: denyKey, Limit: denyLimit, Hits: 1, Mode: algorithms.Enforce})
	}
	return batch, undecided
}

// journal adds the hits the local store charged to their entries' pending
// hits (or counts them dropped when the backend may have taken them
// already); a refund takes back what it can of them.
func (s *Store) journal(reqs []store.Request, res []store.Result, denied, charge bool, now time.Time) {
	for i, r := range reqs {
		if r.Fallback != store.FallbackLocal {
			continue
		}
		e := s.entries[r.Key]
		if r.Mode == algorithms.NegativeHits {
			e.pending -= min(e.pending, r.Hits)
			continue
		}
		if r.Hits == 0 || (denied && !r.Usage) {
			continue
		}
		if !now.Before(e.until) && e.pending > 0 {
			// The window they were admitted in has ended: they are not
			// charged to the next one.
			s.drop(r.Key, e.pending)
			e.pending = 0
			e.gen++
		}
		if until := now.Add(res[i].ResetAfter); until.After(e.until) {
			e.until = until
		}
		if !charge {
			s.drop(r.Key, r.Hits)
			continue
		}
		e.pending += r.Hits
	}
}

// answers are the local store's results as the caller reads them: each
// request's own decision for Local ones, and for the others what their
// fallback says (denied, or allowed without a count).
func answers(reqs []store.Request, res []store.Result) []store.Result {
	out := make([]store.Result, len(reqs))
	for i, r := range reqs {
		out[i] = store.Result{Decision: res[i].Decision, Local: true}
		switch {
		case r.Fallback == store.FallbackLocal:
			out[i].Applied = res[i].Applied // what the local counter took
		case r.Fallback == store.FallbackDeny && r.Mode != algorithms.NegativeHits:
			out[i].Decision = algorithms.Decision{}
		default:
			out[i].Decision = algorithms.Decision{Allowed: true, Remaining: math.MaxUint64}
		}
	}
	return out
}
