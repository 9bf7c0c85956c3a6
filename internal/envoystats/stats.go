// Package envoystats emits envoyproxy/ratelimit's stats under its names and
// with its meaning: per stats key total_hits, over_limit, near_limit,
// within_limit, shadow_mode, over_limit_with_local_cache and
// total_negative_hits; config loads, should_rate_limit errors,
// global_shadow_mode and domain_not_found; calls and response time per gRPC
// method. They live in a lyft/gostats store (envoyproxy's own stats library)
// and are flushed every interval to its sinks: statsd and DogStatsD over the
// network, and Prometheus through statsd_exporter's mapper, as envoyproxy
// does. Counting is an atomic add on counters built once per stats key.
package envoystats

import (
	"sync"
	"sync/atomic"
	"time"

	gostats "github.com/lyft/gostats"
)

// DefaultFlushInterval is envoyproxy's STATS_FLUSH_INTERVAL.
const DefaultFlushInterval = 10 * time.Second

// Stats is one process's envoyproxy stats. Use New, then Start; Close
// flushes what is left.
type Stats struct {
	store  gostats.Store
	sink   gostats.Sink
	rules  gostats.Scope
	server gostats.Scope
	tags   map[string]string

	nearRatio float32
	interval  time.Duration

	configLoadSuccess, configLoadError gostats.Counter
	redisError, serviceError           gostats.Counter
	globalShadowMode                   gostats.Counter

	methods sync.Map // gRPC full method -> *method
	timers  *timerLog
	spare   []timed // a drained buffer, for the next drain (flushMu)

	// notFound counts per unknown domain; domains come from requests, so
	// past maxDomains they count under overflowValue.
	notFound    sync.Map // domain -> gostats.Counter
	notFoundLen atomic.Int64
	maxDomains  int64

	flushMu   sync.Mutex
	closed    bool
	stop      chan struct{}
	stopped   chan struct{}
	startOnce sync.Once
}

// Option configures Stats.
type Option func(*Stats)

// WithNearLimitRatio is NEAR_LIMIT_RATIO (default 0.8), kept in float32 as
// envoyproxy keeps it.
func WithNearLimitRatio(r float64) Option { return func(s *Stats) { s.nearRatio = float32(r) } }

// WithExtraTags is EXTRA_TAGS: tags on every stat, which gostats writes into
// the name (name.__tag=value) for statsd and DogStatsD turns back into tags.
func WithExtraTags(tags map[string]string) Option { return func(s *Stats) { s.tags = tags } }

// WithFlushInterval is STATS_FLUSH_INTERVAL (default 10s).
func WithFlushInterval(d time.Duration) Option { return func(s *Stats) { s.interval = d } }

// WithMaxDomains caps the unknown domains counted under their own name
// (requests choose them); later ones count as _overflow. Default 1000.
func WithMaxDomains(n int) Option { return func(s *Stats) { s.maxDomains = int64(n) } }

// New builds the stats on sink (see Fanout, NewStatsd, NewPrometheus,
// NewDogStatsd). Nothing is flushed until Start or Flush.
func New(sink gostats.Sink, opts ...Option) *Stats {
	s := &Stats{sink: sink, nearRatio: 0.8, interval: DefaultFlushInterval, maxDomains: 1000,
		stop: make(chan struct{}), stopped: make(chan struct{}), timers: newTimerLog()}
	for _, opt := range opts {
		opt(s)
	}
	s.store = gostats.NewStore(sink, false)
	service := s.store.ScopeWithTags(rootScope, s.tags).Scope(serviceScope)
	s.rules = service.Scope(ruleScope)
	s.server = s.store.ScopeWithTags(serverScope, s.tags)
	s.configLoadSuccess = service.NewCounter("config_load_success")
	s.configLoadError = service.NewCounter("config_load_error")
	s.globalShadowMode = service.NewCounter("global_shadow_mode")
	errs := service.Scope(errorScope)
	s.redisError = errs.NewCounter("redis_error")
	s.serviceError = errs.NewCounter("service_error")
	return s
}

// Start flushes every interval until Close.
func (s *Stats) Start() {
	s.startOnce.Do(func() {
		go func() {
			defer close(s.stopped)
			t := time.NewTicker(s.interval)
			defer t.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-t.C:
					s.Flush()
				case <-s.timers.wake:
					s.flushTimers()
				}
			}
		}()
	})
}

// Flush sends every stat that changed since the last flush to the sinks. It
// is safe to call at any time (a Prometheus scrape does, so that it reads
// current values).
func (s *Stats) Flush() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if !s.closed {
		s.spare = s.timers.drain(s.spare)
		s.store.Flush()
	}
}

// flushTimers sends the calls' times kept so far, before the interval ends
// when calls come faster than a buffer holds.
func (s *Stats) flushTimers() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if !s.closed {
		s.spare = s.timers.drain(s.spare)
	}
}

// Close stops the periodic flush and flushes once more; the sinks send what
// they hold on their own.
func (s *Stats) Close() {
	s.startOnce.Do(func() { close(s.stopped) })
	select {
	case <-s.stop:
		return
	default:
		close(s.stop)
	}
	<-s.stopped
	s.Flush()
	s.flushMu.Lock()
	s.closed = true
	s.flushMu.Unlock()
	if c, ok := s.sink.(interface{ close() }); ok {
		c.close()
	}
}

// ConfigLoad counts a config load: config_load_success or
// config_load_error (the previous config stays in force).
func (s *Stats) ConfigLoad(err error) {
	if err != nil {
		s.configLoadError.Inc()
		return
	}
	s.configLoadSuccess.Inc()
}

// RedisError counts a decision the backend could not make
// (call.should_rate_limit.redis_error).
func (s *Stats) RedisError() { s.redisError.Inc() }

// ServiceError counts a request refused before the backend: no domain, no
// descriptors, a malformed request, no config loaded
// (call.should_rate_limit.service_error).
func (s *Stats) ServiceError() { s.serviceError.Inc() }

// GlobalShadowMode counts a request SHADOW_MODE answered OK although it was
// over a limit.
func (s *Stats) GlobalShadowMode() { s.globalShadowMode.Inc() }

// DomainNotFound counts descriptors of a request for a domain no config
// has (envoyproxy counts once per descriptor):
// ratelimit.service.rate_limit.<domain>.domain_not_found.
func (s *Stats) DomainNotFound(domain string, descriptors int) {
	if descriptors <= 0 {
		return
	}
	s.domainCounter(domain).Add(uint64(descriptors))
}

func (s *Stats) domainCounter(domain string) gostats.Counter {
	if c, ok := s.notFound.Load(domain); ok {
		return c.(gostats.Counter)
	}
	name := domain
	if s.notFoundLen.Add(1) > s.maxDomains {
		s.notFoundLen.Add(-1)
		name = overflowValue
		if c, ok := s.notFound.Load(name); ok {
			return c.(gostats.Counter)
		}
	}
	c := s.rules.NewCounter(SanitizeKey(name) + ".domain_not_found")
	if prev, loaded := s.notFound.LoadOrStore(name, c); loaded {
		if name == domain {
			s.notFoundLen.Add(-1)
		}
		return prev.(gostats.Counter)
	}
	return c
}
