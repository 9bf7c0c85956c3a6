package fallback

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/shardlock"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// answer is the backend's last answer for a counter: what was left, and
// until when that says anything (the window's end, the bucket full).
type answer struct {
	remaining uint64
	until     time.Time
}

// seen keeps the backend's last answer per counter of a Local request, so
// that a replica going local starts from its share of what the backend had
// left rather than from a full share: without it a window that is half
// spent when the outage begins would admit half a limit too many. Bounded:
// past maxKeys an arbitrary answer is forgotten, and its counter then
// starts from a full share.
type seen struct {
	seed   maphash.Seed
	perMap int
	shards [shardlock.N]seenShard
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

// record keeps the answers to a batch the backend decided.
func (s *seen) record(reqs []store.Request, res []store.Result, now time.Time) {
	for i, r := range reqs {
		if r.Fallback != store.FallbackLocal || r.Mode == algorithms.NegativeHits || i >= len(res) {
			continue
		}
		sh := &s.shards[shardlock.Of(s.seed, r.Key)]
		a := answer{remaining: res[i].Remaining, until: now.Add(res[i].ResetAfter)}
		sh.mu.Lock()
		if _, ok := sh.answers[r.Key]; !ok && len(sh.answers) >= s.perMap {
			for k := range sh.answers {
				delete(sh.answers, k)
				break
			}
		}
		sh.answers[r.Key] = a
		sh.mu.Unlock()
	}
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
