package rlqs

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// event gathers what one report, timer or reload asks of the store (one
// call for all its buckets) and tells Envoy (one response).
type event struct {
	now     time.Time
	retry   bool // a second call for blocks that did not fit (stream.charge)
	reqs    []store.Request
	parts   []*part
	actions []*rlqsv3.RateLimitQuotaResponse_BucketAction
}

// part is one bucket's share of an event's store call: usage to record
// (one op per counter), then a block to take (one Spare op per counter).
type part struct {
	b     *bucket
	usage uint64
	block uint64
	first int
}

// add queues b's ops.
func (ev *event) add(b *bucket, usage, block uint64) {
	if usage == 0 && block == 0 {
		return
	}
	p := &part{b: b, usage: usage, block: block, first: len(ev.reqs)}
	for _, c := range b.tgt.counters {
		if usage > 0 {
			ev.reqs = append(ev.reqs, store.Request{Key: c.key, Limit: c.limit, Hits: usage, Mode: algorithms.Shadow, Usage: true})
		}
	}
	for _, c := range b.tgt.counters {
		if block > 0 {
			ev.reqs = append(ev.reqs, store.Request{Key: c.key, Limit: c.limit, Hits: block, Mode: algorithms.Spare})
		}
	}
	ev.parts = append(ev.parts, p)
}

// assign queues a for b with ttl whole seconds, and remembers it.
func (st *stream) assign(ev *event, b *bucket, a assignment, ttl int64) {
	a.expires = ev.now.Add(time.Duration(ttl)*time.Second + st.srv.set.margin)
	ev.actions = append(ev.actions, a.action(b.id, ttl))
	b.sent = a
	st.srv.stats.assigned[a.strategy].Add(1)
}

// abandon tells Envoy to forget b, and forgets it.
func (st *stream) abandon(ev *event, key string, b *bucket) {
	ev.actions = append(ev.actions, abandonAction(b.id))
	delete(st.buckets, key)
	st.srv.stats.buckets.Add(-1)
	st.srv.stats.abandoned.Add(1)
}

// onReport handles one report received at now.
func (st *stream) onReport(msg *rlqsv3.RateLimitQuotaUsageReports, now time.Time) error {
	if err := st.checkDomain(msg.GetDomain()); err != nil {
		return err
	}
	if cfg, _ := st.srv.config(); cfg != st.cfg {
		if err := st.onReload(); err != nil {
			return err
		}
	}
	ev := &event{now: now}
	for i, u := range msg.GetBucketQuotaUsages() {
		key, b, err := st.bucketOf(i, u)
		if err != nil {
			return err
		}
		if b == nil {
			continue
		}
		allowed, denied := u.GetNumRequestsAllowed(), u.GetNumRequestsDenied()
		st.srv.stats.allowed.Add(allowed)
		st.srv.stats.denied.Add(denied)
		b.observe(now, allowed, denied, st.srv.set.interval)
		st.plan(ev, key, b, false)
	}
	return st.run(ev)
}

// checkDomain takes the domain from the first report; later ones may
// repeat it or leave it out (Envoy repeats it), never change it.
func (st *stream) checkDomain(d string) error {
	switch {
	case st.domain == "" && d == "":
		return status.Error(codes.InvalidArgument, "rlqs: the first report must name its domain")
	case st.domain == "":
		st.domain = d
		st.cfg, _ = st.srv.config()
	case d != "" && d != st.domain:
		return status.Errorf(codes.InvalidArgument, "rlqs: domain changed from %q to %q; open one stream per domain", st.domain, d)
	}
	return nil
}

// bucketOf finds or starts the bucket of usage i. A bucket id with no
// pair is skipped: Envoy builds one when every value it reads is empty,
// and drops any action for it.
func (st *stream) bucketOf(i int, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) (string, *bucket, error) {
	id := u.GetBucketId()
	if id == nil {
		return "", nil, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: bucket_id missing", i)
	}
	if te := u.GetTimeElapsed(); te != nil && (te.GetSeconds() < 0 || te.GetNanos() < 0) {
		return "", nil, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: negative time_elapsed", i)
	}
	if len(id.GetBucket()) == 0 {
		return "", nil, nil
	}
	key, err := bucketKey(id.GetBucket())
	if err != nil {
		return "", nil, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d].bucket_id: %v", i, err)
	}
	if b := st.buckets[key]; b != nil {
		return key, b, nil
	}
	if len(st.buckets) >= st.srv.set.maxBuckets {
		if !st.full {
			st.full = true
			st.srv.set.log.Warn("rlqs: a stream reports more buckets than it may hold; the others get no assignment",
				zap.String("domain", st.domain), zap.Int("max_buckets", st.srv.set.maxBuckets))
		}
		return "", nil, nil
	}
	s := st.srv
	b := &bucket{id: id, values: id.GetBucket(), cfg: st.cfg}
	b.tgt = resolve(st.cfg, st.domain, b.values, s.set.keys, s.set.shadow)
	s.warnUnserved(b)
	st.buckets[key] = b
	s.stats.buckets.Add(1)
	return key, b, nil
}

// bucketKey names a bucket id injectively: its pairs sorted by key, each
// string length-prefixed.
func bucketKey(m map[string]string) (string, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k == "" {
			return "", fmt.Errorf("an empty key")
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		for _, s := range []string{k, m[k]} {
			sb.WriteString(strconv.Itoa(len(s)))
			sb.WriteByte(':')
			sb.WriteString(s)
		}
	}
	return sb.String(), nil
}

// plan decides what bucket b (at key) needs in ev. turn says its window
// just turned or its rule changed: a new block is due whatever the
// spacing of store calls.
func (st *stream) plan(ev *event, key string, b *bucket, turn bool) {
	s := st.srv.set
	if b.idleFor(ev.now, s.idle()) {
		st.abandon(ev, key, b)
		return
	}
	switch b.tgt.kind {
	case kindAllow:
		st.blanket(ev, b, allowAll)
	case kindDeny:
		st.blanket(ev, b, denyAll)
	case kindShadow:
		st.blanket(ev, b, allowAll)
		ev.add(b, b.unrecorded(), 0)
	case kindBlocks:
		st.planBlocks(ev, b, turn)
	}
}

// blanket keeps a blanket assignment that only a reload changes in force:
// sent once, sent again before it expires.
func (st *stream) blanket(ev *event, b *bucket, want strategy) {
	s := st.srv.set
	if b.sent.strategy == want && b.sent.expires.Sub(ev.now) > 2*s.interval {
		return
	}
	st.assign(ev, b, assignment{strategy: want}, ttlSeconds(s.idle()))
}

// planBlocks records what Envoy admitted beyond its blocks, and asks for a
// block or denies as bucket.plan says.
func (st *stream) planBlocks(ev *event, b *bucket, turn bool) {
	known := func(key string) (span, bool) { return st.srv.spans.get(key, ev.now) }
	v := b.plan(ev.now, st.srv.set, known, turn)
	if v.deny {
		st.deny(ev, b, known)
	}
	ev.add(b, b.unrecorded(), v.block)
}

// deny assigns DENY_ALL while the counters are spent: a fixed window until
// it ends, a sliding one for a reporting interval (it frees hits as it
// slides).
func (st *stream) deny(ev *event, b *bucket, known func(string) (span, bool)) {
	w := &b.win
	w.full = true
	if w.end.IsZero() {
		for _, c := range b.tgt.counters {
			if sp, ok := known(c.key); ok && (w.end.IsZero() || sp.end.Before(w.end)) {
				w.end, w.late, w.sliding = sp.end, sp.late, sp.sliding
			}
		}
	}
	if b.sent.strategy == denyAll && b.sent.expires.After(ev.now.Add(st.srv.set.interval)) {
		return
	}
	ttl := ceilSeconds(st.srv.set.interval)
	if !w.sliding && !w.end.IsZero() {
		ttl = ceilSeconds(w.end.Sub(ev.now))
	}
	st.assign(ev, b, assignment{strategy: denyAll}, ttl)
}

func ceilSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}
