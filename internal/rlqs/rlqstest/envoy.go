package rlqstest

import (
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Settings are one filter's: its domain and reporting interval, how it
// behaves without an assignment, and the ratelimitd replicas of its
// rlqs_server cluster.
type Settings struct {
	Domain   string
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

// Envoy behaves as Envoy's rate_limit_quota filter does (its global
// client, as of 2026): a bucket's first request is decided by the
// no-assignment behavior and reported at once; every Interval all buckets
// are reported (time_elapsed truncated to seconds) and the stream is
// started again if it is down (the report is dropped if that fails); a
// response's token bucket replaces the bucket's unless max_tokens,
// tokens_per_fill and fill_interval's nanos are unchanged, and starts
// full; a TTL is whole seconds; an expired assignment falls back to
// Expired for ExpiredFor, then to NoAssignment; RequestsPerTimeUnit is
// skipped; actions for unknown buckets are dropped; an abandoned bucket is
// forgotten.
//
// Time is the clock's: Tick does what falls due at its time and applies
// the responses received so far; Request decides one request at it.
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
	closed     bool
}

type inboxItem struct {
	resp *rlqsv3.RateLimitQuotaResponse
	from string
}

type cachedBucket struct {
	id      *rlqsv3.BucketId
	action  *typev3.RateLimitStrategy // nil: the no-assignment behavior
	tb      *tokenBucket
	expires time.Time // the action's TTL; zero: none
	// fallback: the expired behavior is in force until fallbackEnd.
	fallback    bool
	fallbackEnd time.Time
	allowed     uint64
	denied      uint64
	lastReport  time.Time
}

// NewEnvoy is a filter reading clock, dialing its servers with dial.
func NewEnvoy(set Settings, clock interface{ Now() time.Time }, dial func(string) (*grpc.ClientConn, error)) *Envoy {
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
}

// Request decides one request of bucket id now, as the filter does.
func (e *Envoy) Request(id map[string]string) Verdict {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	key := idKey(id)
	b := e.buckets[key]
	if b == nil {
		return Verdict{Allowed: e.createBucket(key, id, now)}
	}
	v := Verdict{Allowed: e.decide(b, now), Assigned: b.action != nil && !b.fallback}
	if v.Allowed {
		b.allowed++
	} else {
		b.denied++
	}
	return v
}

// createBucket is the bucket's first request: decided by the no-assignment
// behavior (only a blanket DENY_ALL denies it) and reported at once. The
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
	if e.stream != nil {
		e.send(e.reportOf([]*cachedBucket{b}, now))
	}
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

// expire ends an action whose TTL ran out, then a fallback whose time did.
func (e *Envoy) expire(b *cachedBucket, now time.Time) {
	if b.action != nil && !b.fallback && !b.expires.IsZero() && !now.Before(b.expires) {
		if e.set.Expired == nil {
			b.action, b.tb = nil, nil
			return
		}
		if tbOf(e.set.Expired) != nil {
			if replaces(b.action, e.set.Expired) {
				b.tb = newTokenBucket(tbOf(e.set.Expired), now)
			}
		} else {
			b.tb = nil
		}
		b.action, b.fallback = e.set.Expired, true
		b.fallbackEnd = now.Add(e.set.ExpiredFor.Truncate(time.Second))
	}
	if b.fallback && !now.Before(b.fallbackEnd) {
		b.action, b.tb, b.fallback = nil, nil, false
	}
}

// report sends every bucket's usage, starting the stream if it is down.
func (e *Envoy) report(now time.Time) {
	var all []*cachedBucket
	for _, k := range slices.Sorted(maps.Keys(e.buckets)) {
		all = append(all, e.buckets[k])
	}
	msg := e.reportOf(all, now)
	if e.stream == nil && !e.startStream() {
		return // dropped, as the filter drops it
	}
	e.send(msg)
}

// reportOf takes the buckets' counts (resetting them).
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

// apply is the filter's onQuotaResponse.
func (e *Envoy) apply(it inboxItem, now time.Time) {
	for _, a := range it.resp.GetBucketAction() {
		if len(a.GetBucketId().GetBucket()) == 0 {
			continue
		}
		key := idKey(a.GetBucketId().GetBucket())
		b := e.buckets[key]
		if b == nil {
			continue // an unknown bucket: dropped
		}
		if _, ok := a.GetBucketAction().(*rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_); ok {
			delete(e.buckets, key)
			continue
		}
		qa := a.GetQuotaAssignmentAction()
		st := qa.GetRateLimitStrategy()
		switch st.GetStrategy().(type) {
		case *typev3.RateLimitStrategy_BlanketRule_:
			b.tb = nil
		case *typev3.RateLimitStrategy_TokenBucket:
			if replaces(b.action, st) {
				b.tb = newTokenBucket(st.GetTokenBucket(), now)
			}
		default:
			continue // RequestsPerTimeUnit, unset: skipped
		}
		b.action, b.fallback = st, false
		b.expires = now.Add(time.Duration(qa.GetAssignmentTimeToLive().GetSeconds()) * time.Second)
		e.assigned[it.from] = now
	}
}

// replaces is the filter's shouldReplaceTokenBucket: a token bucket is
// kept when max_tokens, tokens_per_fill and fill_interval's nanos match.
func replaces(cur, next *typev3.RateLimitStrategy) bool {
	a, b := tbOf(cur), tbOf(next)
	if a == nil || b == nil {
		return true
	}
	return a.GetMaxTokens() != b.GetMaxTokens() || a.GetTokensPerFill().GetValue() != b.GetTokensPerFill().GetValue() ||
		a.GetFillInterval().GetNanos() != b.GetFillInterval().GetNanos()
}

func tbOf(s *typev3.RateLimitStrategy) *typev3.TokenBucket {
	if s == nil {
		return nil
	}
	return s.GetTokenBucket()
}

func isBlanket(s *typev3.RateLimitStrategy, r typev3.RateLimitStrategy_BlanketRule) bool {
	br, ok := s.GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_)
	return ok && br.BlanketRule == r
}

// tokenBucket is Envoy's AtomicTokenBucketImpl: continuous refill at rate
// up to max, created full; its rate is tokens_per_fill over fill_interval
// truncated to whole seconds (+Inf below a second, where Envoy divides by
// zero).
type tokenBucket struct {
	max, rate float64
	virtual   float64 // seconds: the tokens are (now - virtual) * rate, at most max
	epoch     time.Time
}

func newTokenBucket(p *typev3.TokenBucket, now time.Time) *tokenBucket {
	secs := p.GetFillInterval().GetSeconds()
	rate := math.Inf(1)
	if secs > 0 {
		rate = float64(p.GetTokensPerFill().GetValue()) / float64(secs)
	}
	tb := &tokenBucket{max: float64(p.GetMaxTokens()), rate: rate, epoch: now}
	tb.virtual = -tb.max / rate
	return tb
}

func (tb *tokenBucket) consume(now time.Time) bool {
	if tb == nil {
		return true
	}
	if math.IsInf(tb.rate, 1) {
		return tb.max >= 1
	}
	t := now.Sub(tb.epoch).Seconds()
	v := max(tb.virtual, t-tb.max/tb.rate)
	if (t-v)*tb.rate < 1 {
		return false
	}
	tb.virtual = v + 1/tb.rate
	return true
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

// Describe says how bucket id is decided now (for test logs).
func (e *Envoy) Describe(id map[string]string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.buckets[idKey(id)]
	if b == nil {
		return "no bucket"
	}
	if b.action == nil {
		return "no assignment"
	}
	s := b.action.String()
	if b.fallback {
		s = "fallback " + s
	}
	return s + " until " + b.expires.Format("05.000")
}
