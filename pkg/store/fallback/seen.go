package fallback

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/shardlock"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// answer is the backend's last answer for a counter: what was left, and
// until when that says anything (the window's end, the bucket full); known
// is the last ticket taken when it was kept (see seen.ticket).
type answer struct {
	remaining uint64
	until     time.Time
	known     uint64
}

// seen keeps the backend's last answer per counter of a Local request, so
// that a replica going local starts from its share of what the backend had
// left rather than from a full share: without it a window that is half
// spent when the outage begins would admit half a limit too many. Bounded:
// past maxKeys an arbitrary answer is forgotten, and its counter then
// starts from a full share.
type seen struct {
	seed    maphash.Seed
	perMap  int
	shards  [shardlock.N]seenShard
	tickets atomic.Uint64
}

type seenShard struct {
	mu      sync.Mutex
	answers map[string]answer
}

func newSeen(maxKeys int) *seen {
	s := &seen{seed: maphash.MakeSeed(), perMap: max(maxKeys/shardlock.N, 1)}
	for i := range s.shards {
		s.shards[i].answers = make(map[string]answer)
	}
	return s
}

// ticket is taken before a call whose answer is kept. A call ticketed
// after the kept answer came (above its known) ran after it and replaces
// it; one that overlapped it may have run first or last, so the lower one
// stays. Only calls in flight are then missing from what a counter going
// local starts from, however late a slow caller keeps its answer.
func (s *seen) ticket() uint64 { return s.tickets.Add(1) }

// record keeps the answers to a batch the backend decided, sent with
// ticket.
func (s *seen) record(reqs []store.Request, res []store.Result, now time.Time, ticket uint64) {
	for i, r := range reqs {
		if r.Fallback != store.FallbackLocal || r.Mode == algorithms.NegativeHits || i >= len(res) {
			continue
		}
		s.keep(r.Key, res[i], now, ticket)
	}
}

// keep keeps the backend's answer res for key's counter, to a call sent
// with ticket.
func (s *seen) keep(key string, res store.Result, now time.Time, ticket uint64) {
	a := answer{remaining: res.Remaining, until: now.Add(res.ResetAfter)}
	sh := &s.shards[shardlock.Of(s.seed, key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old, ok := sh.answers[key]
	if ok && ticket <= old.known && now.Before(old.until) && (old.remaining <= a.remaining || !now.Before(a.until)) {
		a = old // overlapping, and still current: the lower one
	}
	a.known = s.tickets.Load()
	if !ok && len(sh.answers) >= s.perMap {
		for k := range sh.answers {
			delete(sh.answers, k)
			break
		}
	}
	sh.answers[key] = a
}

// last is the backend's last answer for key, if it still holds at now.
func (s *seen) last(key string, now time.Time) (answer, bool) {
	sh := &s.shards[shardlock.Of(s.seed, key)]
	sh.mu.Lock()
	a, ok := sh.answers[key]
	sh.mu.Unlock()
	return a, ok && now.Before(a.until)
}

// forget drops keys' answers (a counters reset).
func (s *seen) forget(keys ...string) {
	for _, k := range keys {
		sh := &s.shards[shardlock.Of(s.seed, k)]
		sh.mu.Lock()
		delete(sh.answers, k)
		sh.mu.Unlock()
	}
}
