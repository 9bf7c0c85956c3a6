package rlqs

import (
	"bytes"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// onReport handles one report received at now.
func (st *stream) onReport(r *report, now time.Time) error {
	if err := st.checkDomain(r.domain); err != nil {
		return err
	}
	if cfg, _, _ := st.srv.config(); cfg != st.cfg {
		if err := st.onReload(); err != nil {
			return err
		}
	}
	ev := &event{now: now}
	for i := range r.usages {
		u := &r.usages[i]
		key, b, created, err := st.bucketOf(r, i)
		if err != nil {
			return err
		}
		st.srv.stats.allowed.Add(u.allowed)
		st.srv.stats.denied.Add(u.denied)
		if b == nil {
			continue
		}
		if created && key != "" && u.allowed > 0 && (len(r.usages) > 1 || u.elapsed > 0) {
			// Not the report of a new bucket (it comes alone, 0 s after
			// the bucket's first request) but a stream taken over: what
			// Envoy admitted, another stream assigned.
			b.foreign = true
		}
		b.observe(now, u.allowed, u.denied, st.srv.set.interval)
		if key == "" {
			// Past the cap: no assignment, but what it reports allowed is
			// recorded (whoever assigned it).
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
// buckets, a bucket that reported requests allowed is resolved for this
// report only, to record them, and not kept (its key is then "").
func (st *stream) bucketOf(r *report, i int) (string, *bucket, bool, error) {
	u := &r.usages[i]
	switch key := r.keyOf(u); {
	case !u.hasID:
		return "", nil, false, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: bucket_id missing", i)
	case u.elapsed < 0:
		return "", nil, false, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: negative time_elapsed", i)
	case u.pairs == 0:
		return "", nil, false, nil
	case bytes.HasPrefix(key, []byte("0:")):
		return "", nil, false, status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d].bucket_id: an empty key", i)
	default:
		if b := st.buckets[string(key)]; b != nil {
			return b.key, b, false, nil
		}
	}
	s := st.srv
	if !s.track() {
		s.stats.untracked.Add(1)
		s.warnFull(st.domain)
		if u.allowed == 0 {
			return "", nil, false, nil
		}
		b := &bucket{key: string(r.keyOf(u))}
		b.tgt = resolve(st.cfg, st.domain, b.values(), s.set.keys, s.set.shadow)
		return "", b, true, nil
	}
	b := &bucket{key: string(r.keyOf(u))}
	b.tgt = resolve(st.cfg, st.domain, b.values(), s.set.keys, s.set.shadow)
	s.warnUnserved(b)
	st.buckets[b.key] = b
	return b.key, b, true, nil
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
	if s.due(&s.lastFullLog, time.Minute) {
		s.set.log.Warn("rlqs: the server holds as many buckets as it may (RLQS_MAX_BUCKETS); new ones get no assignment until others are abandoned",
			zap.String("domain", domain), zap.Int("max_buckets", s.set.maxBuckets))
	}
}
