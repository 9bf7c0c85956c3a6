package rlqstest

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ReportInterval is how often the filter reports: filter_persistence.cc
// hard-codes it, whatever a bucket's reporting_interval says.
const ReportInterval = 5 * time.Second

// Settings are one filter's: its domain, how it behaves without an
// assignment, and the ratelimitd replicas of its rlqs_server cluster.
type Settings struct {
	Domain string
	// Interval is how often it reports; zero is Envoy's ReportInterval.
	// (Only tests of the server's own settings set another.)
	Interval time.Duration
	// NoAssignment is no_assignment_behavior's blanket rule; nil is
	// ALLOW_ALL, the filter's default.
	NoAssignment *typev3.RateLimitStrategy
	// Expired is expired_assignment_behavior's fallback_rate_limit, in
	// force for ExpiredFor (whole seconds, as the filter reads it); nil:
	// an expired assignment falls back to NoAssignment at once.
	Expired    *typev3.RateLimitStrategy
	ExpiredFor time.Duration
	Addrs      []string
}

// Envoy behaves as Envoy's rate_limit_quota filter does, as its source
// reads (source/extensions/filters/http/rate_limit_quota/, late 2026; the
// behaviours are named where they are modelled):
//
//   - a request whose bucket id cannot be built is allowed, never
//     reported (filter.cc, matcher.cc);
//   - a bucket's first request is decided by the no-assignment behavior
//     (only a blanket DENY_ALL denies it) and reported at once, in a report
//     of that bucket alone, dropped if the stream is down
//     (global_client_impl.cc, createBucketImpl);
//   - every Interval (5 s) all buckets are reported, their counts reset
//     first; the stream is started again then if it is down, and the
//     report dropped if that fails (onSendReportsTimer);
//   - any new action replaces the bucket's, a token bucket seeded from the
//     old one (tokenbucket.go), unless max_tokens, tokens_per_fill and the
//     fill interval's nanos are unchanged (onQuotaResponseImpl);
//   - TTLs count whole seconds; an expired assignment falls back to the
//     expired behavior, then the no-assignment one (onActionExpirationTimer).
//
// Time is the clock's: Tick does what falls due by now and applies the
// responses received so far; Request decides one request at now.
type Envoy struct {
	set   Settings
	clock interface{ Now() time.Time }
	dial  func(addr string) (*grpc.ClientConn, error)

	mu         sync.Mutex
	buckets    map[string]*cachedBucket
	started    bool
	nextReport time.Time
	stream     *clientStream
	pick       int
	conns      map[string]*grpc.ClientConn
	inbox      []inboxItem
	sent       map[string]int // reports sent, by server
	received   map[string]int // responses received, by server
	assigned   map[string]time.Time
	dropped    int // reports built and dropped: no stream
	closed     bool
}

type inboxItem struct {
	resp *rlqsv3.RateLimitQuotaResponse
	from string
}

// cachedBucket is the filter's CachedBucket.
type cachedBucket struct {
	id      *rlqsv3.BucketId
	action  *typev3.RateLimitStrategy // nil: the no-assignment behavior
	tb      *tokenBucket              // the token_bucket_limiter
	expires time.Time                 // the action's TTL; zero: none
	// fallback: the expired behavior is in force until fallbackEnd.
	fallback    bool
	fallbackEnd time.Time
	allowed     uint64
	denied      uint64
	lastReport  time.Time
}

// NewEnvoy is a filter reading clock, dialing its servers with dial.
func NewEnvoy(set Settings, clock interface{ Now() time.Time }, dial func(string) (*grpc.ClientConn, error)) *Envoy {
	if set.Interval <= 0 {
		set.Interval = ReportInterval
	}
	return &Envoy{
		set: set, clock: clock, dial: dial,
		buckets:  map[string]*cachedBucket{},
		conns:    map[string]*grpc.ClientConn{},
		sent:     map[string]int{},
		received: map[string]int{},
		assigned: map[string]time.Time{},
	}
}

// Verdict is how the filter decided one request.
type Verdict struct {
	Allowed bool
	// Assigned: by an assignment ratelimitd sent, not by the
	// no-assignment or expired-assignment behavior.
	Assigned bool
	// Unbucketed: the bucket id could not be built; allowed, unreported.
	Unbucketed bool
}

// Missing, as a value of a bucket id passed to Request, is a custom value
// whose input the request lacks (a header it does not carry).
const Missing = "\x00missing"

// Request decides one request of bucket id now, as the filter does.
func (e *Envoy) Request(id map[string]string) Verdict {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range id {
		if v == Missing {
			// filter.cc: generateBucketId failed: fail open, no report.
			return Verdict{Allowed: true, Unbucketed: true}
		}
	}
	key := idKey(id)
	b := e.buckets[key]
	if b == nil {
		return Verdict{Allowed: e.createBucket(key, id, now)}
	}
	e.expire(b, now)
	v := Verdict{Allowed: e.decide(b, now), Assigned: b.action != nil && !b.fallback}
	if v.Allowed {
		b.allowed++
	} else {
		b.denied++
	}
	return v
}

// createBucket is the bucket's first request: decided by the no-assignment
// behavior (only a blanket DENY_ALL denies it) and reported at once; the
// report is built (its counts reset) whether or not the stream is up. The
// first bucket ever starts the report timer and the stream.
func (e *Envoy) createBucket(key string, id map[string]string, now time.Time) bool {
	allow := !isBlanket(e.set.NoAssignment, typev3.RateLimitStrategy_DENY_ALL)
	b := &cachedBucket{id: &rlqsv3.BucketId{Bucket: maps.Clone(id)}, lastReport: now}
	if allow {
		b.allowed = 1
	} else {
		b.denied = 1
	}
	e.buckets[key] = b
	if !e.started {
		e.started = true
		e.nextReport = now.Add(e.set.Interval)
		e.startStream()
	}
	msg := e.reportOf([]*cachedBucket{b}, now)
	if e.stream == nil {
		e.dropped++ // sendUsageReportImpl: the stream is down
		return allow
	}
	e.send(msg)
	return allow
}

// decide is the filter's shouldAllowRequest.
func (e *Envoy) decide(b *cachedBucket, now time.Time) bool {
	st := b.action
	if st == nil {
		st = e.set.NoAssignment
	}
	if st == nil {
		return true
	}
	switch s := st.GetStrategy().(type) {
	case *typev3.RateLimitStrategy_BlanketRule_:
		return s.BlanketRule == typev3.RateLimitStrategy_ALLOW_ALL
	case *typev3.RateLimitStrategy_TokenBucket:
		if b.tb == nil {
			return true
		}
		return b.tb.consume(now)
	default:
		return true // RequestsPerTimeUnit and an unset strategy fail open
	}
}

// Tick does what falls due now: expiries, the report timer, and the
// responses received so far.
func (e *Envoy) Tick() {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.buckets {
		e.expire(b, now)
	}
	if e.started && !now.Before(e.nextReport) {
		e.nextReport = now.Add(e.set.Interval)
		e.report(now)
	}
	for _, it := range e.inbox {
		e.apply(it, now)
	}
	e.inbox = nil
}

// report sends every bucket's usage, starting the stream if it is down:
// the counts are reset first, so a report that cannot go out is lost.
func (e *Envoy) report(now time.Time) {
	var all []*cachedBucket
	for _, k := range slices.Sorted(maps.Keys(e.buckets)) {
		all = append(all, e.buckets[k])
	}
	msg := e.reportOf(all, now)
	if e.stream == nil && !e.startStream() {
		e.dropped++
		return
	}
	e.send(msg)
}

// reportOf takes the buckets' counts, resetting them; time_elapsed is
// whole seconds since each bucket's last report (0 on its first).
func (e *Envoy) reportOf(bs []*cachedBucket, now time.Time) *rlqsv3.RateLimitQuotaUsageReports {
	msg := &rlqsv3.RateLimitQuotaUsageReports{Domain: e.set.Domain}
	for _, b := range bs {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           b.id,
			TimeElapsed:        &durationpb.Duration{Seconds: int64(now.Sub(b.lastReport) / time.Second)},
			NumRequestsAllowed: b.allowed,
			NumRequestsDenied:  b.denied,
		})
		b.allowed, b.denied, b.lastReport = 0, 0, now
	}
	return msg
}

func idKey(m map[string]string) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		sb.WriteString(k)
		sb.WriteByte(0)
		sb.WriteString(m[k])
		sb.WriteByte(0)
	}
	return sb.String()
}

// Dropped is how many reports e built and could not send (the stream was
// down): their counts are lost.
func (e *Envoy) Dropped() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropped
}
