package rlqs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// onReport handles one report received at now.
func (st *stream) onReport(msg *rlqsv3.RateLimitQuotaUsageReports, now time.Time) error {
	if err := st.checkDomain(msg.GetDomain()); err != nil {
		return err
	}
	if cfg, _, _ := st.srv.config(); cfg != st.cfg {
		if err := st.onReload(); err != nil {
			return err
		}
	}
	ev := &event{now: now}
	usages := msg.GetBucketQuotaUsages()
	for i, u := range usages {
		key, b, created, err := st.bucketOf(i, u)
		if err != nil {
			return err
		}
		if b == nil {
			continue
		}
		allowed, denied := u.GetNumRequestsAllowed(), u.GetNumRequestsDenied()
		st.srv.stats.allowed.Add(allowed)
		st.srv.stats.denied.Add(denied)
		if created && allowed > 0 && (len(usages) > 1 || u.GetTimeElapsed().GetSeconds() > 0) {
			// Not the report of a new bucket (it comes alone, 0 s after
			// the bucket's first request) but a stream taken over: what
			// Envoy admitted, another stream assigned.
			b.foreign = true
		}
		b.observe(now, allowed, denied, st.srv.set.interval)
		if key == "" {
			// Past the cap: no assignment, but its usage is recorded.
			ev.add(b, b.unrecorded(), verdict{})
			continue
		}
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
		cfg, gen, _ := st.srv.config()
		st.cfg = cfg
		st.gen.Store(gen)
	case d != "" && d != st.domain:
		return status.Errorf(codes.InvalidArgument, "rlqs: domain changed from %q to %q; open one stream per domain", st.domain, d)
	}
	return nil
}

// bucketOf finds or starts the bucket of usage i (created: just now). A
// bucket id with no pair is skipped: Envoy builds one when every value it
// reads is empty, and drops any action for it. Past the server's cap on
// buckets, a bucket is resolved for this report only and not kept (its
// key is then "").
func (st *stream) bucketOf(i int, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) (string, *bucket, bool, error) {
	id := u.GetBucketId()
	if id == nil {
		return "", nil, false, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: bucket_id missing", i)
	}
	if te := u.GetTimeElapsed(); te != nil && (te.GetSeconds() < 0 || te.GetNanos() < 0) {
		return "", nil, false, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: negative time_elapsed", i)
	}
	if len(id.GetBucket()) == 0 {
		return "", nil, false, nil
	}
	key, err := bucketKey(id.GetBucket())
	if err != nil {
		return "", nil, false, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d].bucket_id: %v", i, err)
	}
	if b := st.buckets[key]; b != nil {
		return key, b, false, nil
	}
	s := st.srv
	b := &bucket{key: key}
	b.tgt = resolve(st.cfg, st.domain, id.GetBucket(), s.set.keys, s.set.shadow)
	if !s.track() {
		s.stats.untracked.Add(1)
		s.warnFull(st.domain)
		return "", b, true, nil
	}
	s.warnUnserved(b)
	st.buckets[key] = b
	return key, b, true, nil
}

// track counts a new bucket against the server's cap; false past it.
func (s *Server) track() bool {
	for {
		n := s.stats.buckets.Load()
		if n >= int64(s.set.maxBuckets) {
			return false
		}
		if s.stats.buckets.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// forget drops the bucket at key.
func (st *stream) forget(key string) {
	if _, ok := st.buckets[key]; ok {
		delete(st.buckets, key)
		st.srv.stats.buckets.Add(-1)
	}
}

// warnFull logs, at most once a minute, that buckets go unserved past the
// cap.
func (s *Server) warnFull(domain string) {
	now := s.now()
	s.mu.Lock()
	due := now.Sub(s.lastFullLog) >= time.Minute
	if due {
		s.lastFullLog = now
	}
	s.mu.Unlock()
	if due {
		s.set.log.Warn("rlqs: the server holds as many buckets as it may (RLQS_MAX_BUCKETS); new ones get no assignment until others are abandoned",
			zap.String("domain", domain), zap.Int("max_buckets", s.set.maxBuckets))
	}
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
