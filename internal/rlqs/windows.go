package rlqs

import (
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// span is a counter's window as one decision told it: what it had left and
// when the window ends, measured on the server's clock from around the
// store call. Redis decided at some instant between the call's start and
// its answer, so the end read from the start is early (grants expire by
// it) and the end read from the answer is late (the next window has begun
// by it).
type span struct {
	remaining  uint64
	end, late  time.Time
	sliding    bool
	decidedOut bool // the counter had no room for the hits asked
}

// spanOf reads d, the decision of a window counter under lim asked at sent
// and answered at got.
func spanOf(lim algorithms.Limit, d algorithms.Decision, sent, got time.Time) span {
	rest := d.ResetAfter
	// A window whose ResetAfter runs past its end (sliding_window's, to
	// the end of the next window while this one has hits: the registry's
	// ResetLag) gives room back before it ends.
	lag := time.Duration(lim.Algorithm.Info().ResetLag) * lim.Period
	sliding := lag > 0
	if sliding && rest > lag {
		rest -= lag
	}
	return span{remaining: d.Remaining, end: sent.Add(rest), late: got.Add(rest), sliding: sliding, decidedOut: !d.Allowed}
}

// windows is what this replica last learned of each counter, shared by its
// streams, so that a grant is sized from the latest answer whichever
// Envoy's call got it. It is a cache of at most maxSpans counters: a
// counter it lost is sized from its limit, and its Spare op tells the rest.
type windows struct {
	mu sync.Mutex
	m  map[string]span
}

// maxSpans bounds the cache: the counters many Envoys share are few, and
// one only a bucket of its own charges needs no sharing.
const maxSpans = 1 << 14

func newWindows() *windows { return &windows{m: map[string]span{}} }

// get is the key's span while its window lasts.
func (w *windows) get(key string, now time.Time) (span, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.m[key]
	if !ok || !now.Before(s.end) {
		return span{}, false
	}
	return s, true
}

func (w *windows) put(key string, s span, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.m[key]; !ok && len(w.m) >= maxSpans {
		for k, old := range w.m {
			if !now.Before(old.end) {
				delete(w.m, k)
			}
		}
		// Still full: an eighth goes, in the map's own order.
		for k := range w.m {
			if len(w.m) < maxSpans*7/8 {
				break
			}
			delete(w.m, k)
		}
	}
	w.m[key] = s
}
