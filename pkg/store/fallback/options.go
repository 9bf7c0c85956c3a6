package fallback

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// Defaults of the options below.
const (
	// DefaultInterval is how often a pass tries to charge what was
	// decided locally (and the presence beats while none is needed).
	DefaultInterval = 100 * time.Millisecond
	// DefaultHeartbeat is how often a replica tells the others it is live.
	DefaultHeartbeat = time.Second
	// DefaultMaxKeys bounds the counters decided locally and the backend
	// answers kept to start them from.
	DefaultMaxKeys = 1 << 17
)

type options struct {
	now        func() time.Time
	replicas   int
	presence   Presence
	heartbeat  time.Duration
	interval   time.Duration
	maxKeys    int
	id         string
	uncharged  func(error) bool
	reconciled func(key string, hits uint64)
	dropped    func(key string, hits uint64)
}

func defaults() options {
	return options{now: time.Now, replicas: 1, heartbeat: DefaultHeartbeat, interval: DefaultInterval, maxKeys: DefaultMaxKeys}
}

// Option configures a Store.
type Option func(*options)

// WithClock sets where the store, and its local one, read time.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithReplicas is the number of replicas a replica shares a limit with
// until it has seen another through the presence (started while the
// backend was down, or alone so far): each decides with 1/n of a limit.
// The default is 1, a whole limit.
func WithReplicas(n int) Option { return func(o *options) { o.replicas = max(n, 1) } }

// WithPresence makes replicas learn of each other through p, beating every
// heartbeat (DefaultHeartbeat if <= 0); without it a limit is always
// shared by WithReplicas' count.
func WithPresence(p Presence, heartbeat time.Duration) Option {
	return func(o *options) {
		o.presence = p
		if heartbeat > 0 {
			o.heartbeat = heartbeat
		}
	}
}

// WithInterval sets how often the background loop charges what was
// decided locally; <= 0 runs no loop (call Reconcile and Beat instead).
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithMaxKeys bounds the counters decided locally (their local store's
// keys, memstore.WithMaxKeys) and the backend answers kept per counter.
func WithMaxKeys(n int) Option { return func(o *options) { o.maxKeys = max(n, 1) } }

// WithID names this replica in the presence; the default is random.
func WithID(id string) Option { return func(o *options) { o.id = id } }

// WithUncharged tells the backend errors that certainly charged nothing
// (redisstore.NotRun): the hits a batch failing so admits locally are
// charged later. After any other error the backend may have taken them
// already, so they are not (a decision is charged at most once).
func WithUncharged(f func(error) bool) Option { return func(o *options) { o.uncharged = f } }

// WithReconciled is told the hits charged to key's counter after an
// outage, and WithDropped those admitted locally that never will be: their
// window ended first, or the backend may have counted them already.
func WithReconciled(f func(key string, hits uint64)) Option {
	return func(o *options) { o.reconciled = f }
}

// WithDropped: see WithReconciled.
func WithDropped(f func(key string, hits uint64)) Option {
	return func(o *options) { o.dropped = f }
}

func (o options) memOptions() []memstore.Option {
	return []memstore.Option{memstore.WithClock(o.now), memstore.WithMaxKeys(o.maxKeys)}
}
