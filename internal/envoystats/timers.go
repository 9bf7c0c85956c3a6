package envoystats

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
)

// A call's response time is not sent to the sinks on the call's path: it
// goes to one of several small buffers, picked at random so that
// concurrent calls rarely share one, and the flush goroutine sends the
// buffers' values (to statsd as timer lines, to Prometheus as observations
// of the mapped histogram). A call pays an uncontended lock and an append,
// where sending each value at once made every call contend for the statsd
// sink's lock and the histogram's counters.
const (
	// shardSoft is the values a buffer holds before it asks for an early
	// flush; shardHard the most it holds: past it values are dropped until
	// the flush catches up (counted in dropped).
	shardSoft = 512
	shardHard = 16 * shardSoft
)

type timed struct {
	m  *method
	ms float64
}

type timerShard struct {
	mu   sync.Mutex
	vals []timed
	_    [64]byte // a cache line of its own
}

type timerLog struct {
	shards  []timerShard
	mask    uint32
	wake    chan struct{} // capacity 1: a buffer reached shardSoft
	dropped atomic.Uint64
}

func newTimerLog() *timerLog {
	n := 8
	for n < 4*runtime.GOMAXPROCS(0) {
		n *= 2
	}
	return &timerLog{shards: make([]timerShard, n), mask: uint32(n - 1), wake: make(chan struct{}, 1)}
}

// add keeps one call's time for the next drain.
func (l *timerLog) add(m *method, ms float64) {
	sh := &l.shards[rand.Uint32()&l.mask]
	sh.mu.Lock()
	n := len(sh.vals)
	if n < shardHard {
		sh.vals = append(sh.vals, timed{m, ms})
	}
	sh.mu.Unlock()
	switch {
	case n >= shardHard:
		l.dropped.Add(1)
	case n+1 == shardSoft:
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// drain sends every kept time to its method's timer, keeping each buffer's
// memory for the next values.
func (l *timerLog) drain(spare []timed) []timed {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		vals := sh.vals
		sh.vals = spare[:0]
		sh.mu.Unlock()
		for _, v := range vals {
			v.m.responseTime.AddValue(v.ms)
		}
		spare = vals
	}
	return spare
}
