package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxPendingNotices bounds the keys waiting for their notice. Past it a key
// is not announced (a failure, WithNoticeFailure): replicas then answer
// its cached denials until LOCAL_CACHE_MAX_AGE.
const maxPendingNotices = 100_000

// errNoticesFull is the failure of a notice dropped past maxPendingNotices.
var errNoticesFull = errors.New("redisstore: too many notices waiting; some were dropped")

// notices publishes keys on the notices' channel (refunds.go) in the
// background, one round trip at a time: the keys that arrive while one is
// in flight wait for the next, each once however often it came (a burst of
// undos of a few hot counters costs a few messages, not one per request),
// and the publishing holds one of the pool's connections at most.
type notices struct {
	publish func(ctx context.Context, keys []string) error
	timeout time.Duration
	failed  func(op string, err error)
	// max is maxPendingNotices (tests lower it).
	max int

	mu      sync.Mutex
	pending map[string]struct{}
	order   []string
	running bool
	stopped bool
	wg      sync.WaitGroup
}

func newNotices(client redis.UniversalClient, channel string, timeout time.Duration, failed func(op string, err error)) *notices {
	publish := func(ctx context.Context, keys []string) error {
		if len(keys) == 1 {
			return client.Publish(ctx, channel, keys[0]).Err()
		}
		_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Publish(ctx, channel, k)
			}
			return nil
		})
		return err
	}
	return &notices{publish: publish, timeout: timeout, failed: failed, max: maxPendingNotices, pending: map[string]struct{}{}}
}

// add queues keys for their notice, after the change that may have lifted
// their cached denials; none is sent after stop.
func (n *notices) add(keys []string) {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return
	}
	dropped := false
	for _, k := range keys {
		if _, ok := n.pending[k]; ok {
			continue
		}
		if len(n.order) >= n.max {
			dropped = true
			continue
		}
		n.pending[k] = struct{}{}
		n.order = append(n.order, k)
	}
	start := !n.running && len(n.order) > 0
	if start {
		n.running = true
		n.wg.Add(1)
	}
	n.mu.Unlock()
	if dropped {
		n.fail(errNoticesFull)
	}
	if start {
		go n.run()
	}
}

// run publishes what is pending, round trip after round trip, until
// nothing is.
func (n *notices) run() {
	defer n.wg.Done()
	for {
		n.mu.Lock()
		keys := n.order
		if len(keys) == 0 {
			n.running = false
			n.mu.Unlock()
			return
		}
		n.order = nil
		clear(n.pending)
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
		err := n.publish(ctx, keys)
		cancel()
		if err != nil {
			n.fail(err)
		}
	}
}

func (n *notices) fail(err error) {
	if n.failed != nil {
		n.failed("publish", err)
	}
}

// stop sends what is pending and waits for it; later keys are dropped.
func (n *notices) stop() {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.wg.Wait()
}
