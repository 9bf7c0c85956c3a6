// Package rlqs serves Envoy's Rate Limit Quota Service
// (envoy.service.rate_limit_quota.v3.RateLimitQuotaService): Envoys report
// the requests of their buckets on one stream per domain and decide every
// request locally from what ratelimitd assigns. A bucket id maps to a rule
// of the configuration as a request descriptor does (config.MatchBucket);
// a rule of window limits is served as token buckets whose every token
// (burst and refill until the window ends) was charged in its counters
// before Envoy could use it, so that with DENY_ALL fallbacks the fleet
// never admits more than the limit (docs/rlqs.md).
package rlqs

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Rules is where the server reads the configuration in force
// (*config.Watcher, the xDS source).
type Rules interface {
	Current() *config.Config
}

// Server is the RLQS service. Each stream holds its Envoy's grants: the
// replica serving the stream is their lease holder.
type Server struct {
	rules  Rules
	lender store.Lender
	set    settings
	caps   caps
	spans  *windows
	stats  counters

	mu      sync.Mutex
	cfg     *config.Config
	gen     uint64        // counts changes of cfg
	changed chan struct{} // closed when cfg changes, then replaced
	open    map[*stream]struct{}
	poll    Timer
	done    chan struct{}
	closed  bool
	rnd     *rand.Rand
	// lastErrLog and warned keep logs of store failures and of rules
	// RLQS cannot serve from repeating.
	lastErrLog  time.Time
	lastFullLog time.Time
	warned      map[string]bool
}

// New serves the rules in force with grants charged in lender (the store
// under any decorator: a grant is already a lease).
func New(rules Rules, lender store.Lender, opts ...Option) *Server {
	set := defaults()
	for _, o := range opts {
		o(&set)
	}
	s := &Server{
		rules:   rules,
		lender:  lender,
		set:     set,
		caps:    caps{buckets: set.maxBuckets, entries: set.maxEntries, valueLen: set.maxValueLen},
		spans:   newWindows(),
		changed: make(chan struct{}),
		open:    map[*stream]struct{}{},
		done:    make(chan struct{}),
		rnd:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	s.cfg = rules.Current()
	s.mu.Lock()
	s.armPoll()
	s.mu.Unlock()
	return s
}

// Register adds the service to srv, whose codec must hand reports their
// bytes (internal/ratelimit's guard codec, or ServerCodec).
func (s *Server) Register(srv grpc.ServiceRegistrar) {
	desc := rlqsv3.RateLimitQuotaService_ServiceDesc
	desc.Streams = []grpc.StreamDesc{{
		StreamName:    "StreamRateLimitQuotas",
		Handler:       func(_ any, ss grpc.ServerStream) error { return s.serve(ss) },
		ServerStreams: true,
		ClientStreams: true,
	}}
	desc.HandlerType = (*any)(nil)
	srv.RegisterService(&desc, s)
}

// Shutdown ends every stream with UNAVAILABLE, so that a graceful stop
// need not wait for them: their Envoys keep their grants until the TTLs
// run out and reconnect to another replica at their next report.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.poll != nil {
		s.poll.Stop()
	}
	close(s.done)
}

// armPoll checks the rules in force once a second (s.mu held): a reload
// reaches every stream at once, not at its next report.
func (s *Server) armPoll() {
	if s.closed {
		return
	}
	s.poll = s.set.clock.AfterFunc(s.set.poll, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refresh()
		s.armPoll()
	})
}

// refresh takes the rules in force (s.mu held): when they changed, it
// closes the channel the streams wait on and opens the next one.
func (s *Server) refresh() {
	if cfg := s.rules.Current(); cfg != s.cfg {
		s.cfg = cfg
		s.gen++
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// config is the configuration in force, its generation and the channel
// closed when it changes.
func (s *Server) config() (*config.Config, uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh()
	return s.cfg, s.gen, s.changed
}

// behind counts the open streams that have not taken the configuration in
// force yet: Stats counts them as pending events.
func (s *Server) behind() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for st := range s.open {
		if st.gen.Load() < s.gen {
			n++
		}
	}
	return n
}

// nanos is a fill_interval nanos for a new grant, other than prev: see
// assignment.tokenBucketOf.
func (s *Server) nanos(prev int32) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if n := s.rnd.Int32N(1_000_000_000); n != prev {
			return n
		}
	}
}

// counters are the server's tallies (Stats, the metrics).
type counters struct {
	streams, buckets, untracked                  atomic.Int64
	reports, rejected, responses, pending        atomic.Int64
	assigned                                     [4]atomic.Int64 // by strategy
	abandoned                                    atomic.Int64
	granted, allowed, denied, recorded, returned atomic.Uint64
	lapsed                                       atomic.Uint64
	calls, storeErrors                           atomic.Int64
	outstanding                                  atomic.Int64
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	// Streams open, Buckets they track (at most the server's cap), and
	// Untracked: reports of buckets past it.
	Streams, Buckets, Untracked int64
	// Reports received and handled, Rejected with an error, Responses
	// sent; Pending events (reports, timers, reloads) not handled yet.
	Reports, Rejected, Responses, Pending int64
	// Assignments sent, by strategy; Abandoned buckets.
	TokenBuckets, AllowAll, DenyAll, Abandoned int64
	// Hits: Granted (charged for grants), reported Allowed and Denied,
	// Recorded as usage after the fact, Returned to the store, Lapsed
	// (charged for a grant that could not be sent); Outstanding: charged
	// and not yet reported used, in the current windows.
	Granted, Allowed, Denied, Recorded, Returned, Lapsed uint64
	Outstanding                                          int64
	// Store calls and the errors among them.
	StoreCalls, StoreErrors int64
}

// Stats reads the counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	return Stats{
		Streams: c.streams.Load(), Buckets: c.buckets.Load(), Untracked: c.untracked.Load(),
		Reports: c.reports.Load(), Rejected: c.rejected.Load(), Responses: c.responses.Load(), Pending: c.pending.Load() + s.behind(),
		TokenBuckets: c.assigned[tokenBucket].Load(), AllowAll: c.assigned[allowAll].Load(), DenyAll: c.assigned[denyAll].Load(),
		Abandoned: c.abandoned.Load(),
		Granted:   c.granted.Load(), Allowed: c.allowed.Load(), Denied: c.denied.Load(),
		Recorded: c.recorded.Load(), Returned: c.returned.Load(), Lapsed: c.lapsed.Load(),
		Outstanding: c.outstanding.Load(),
		StoreCalls:  c.calls.Load(), StoreErrors: c.storeErrors.Load(),
	}
}

// now is the server's clock.
func (s *Server) now() time.Time { return s.set.clock.Now() }
