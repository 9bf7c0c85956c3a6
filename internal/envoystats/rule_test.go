package envoystats

import (
	"maps"
	"sync"
	"testing"
)

// recorder is a gostats sink that adds up what each flush sends.
type recorder struct {
	mu       sync.Mutex
	counters map[string]uint64
	gauges   map[string]uint64
	timers   map[string][]float64
}

func newRecorder() *recorder {
	return &recorder{counters: map[string]uint64{}, gauges: map[string]uint64{}, timers: map[string][]float64{}}
}

func (r *recorder) FlushCounter(name string, v uint64) {
	r.mu.Lock()
	r.counters[name] += v
	r.mu.Unlock()
}

func (r *recorder) FlushGauge(name string, v uint64) {
	r.mu.Lock()
	r.gauges[name] = v
	r.mu.Unlock()
}

func (r *recorder) FlushTimer(name string, v float64) {
	r.mu.Lock()
	r.timers[name] = append(r.timers[name], v)
	r.mu.Unlock()
}

func (r *recorder) snapshot() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counters)
}

// TestCount holds each decision to the counts envoyproxy's limiter makes of
// it (base_limiter: checkOverLimitThreshold, checkNearLimitThreshold,
// increaseShadowModeStats), worked out by hand for a limit of 10 (near-limit
// threshold 8) unless said otherwise.
func TestCount(t *testing.T) {
	const p = "ratelimit.service.rate_limit.d.k."
	tests := []struct {
		name string
		d    Decision
		// then: the decisions after d on the same counter.
		then []Decision
		want map[string]uint64
	}{
		{"far below the limit", Decision{Hits: 2, Limit: 10, Before: 3}, nil,
			map[string]uint64{"total_hits": 2, "within_limit": 2}},
		{"crossing the near-limit threshold: only the hits past it are near", Decision{Hits: 3, Limit: 10, Before: 7}, nil,
			map[string]uint64{"total_hits": 3, "within_limit": 3, "near_limit": 2}},
		{"already past the threshold: every hit is near", Decision{Hits: 2, Limit: 10, Before: 8}, nil,
			map[string]uint64{"total_hits": 2, "within_limit": 2, "near_limit": 2}},
		{"exactly at the limit is within", Decision{Hits: 1, Limit: 10, Before: 9}, nil,
			map[string]uint64{"total_hits": 1, "within_limit": 1, "near_limit": 1}},
		{"crossing the limit: the part past it is over, the part before it near", Decision{Hits: 5, Limit: 10, Before: 7, Over: true}, nil,
			map[string]uint64{"total_hits": 5, "over_limit": 2, "near_limit": 2}},
		{"crossing the limit from below the threshold", Decision{Hits: 8, Limit: 10, Before: 4, Over: true}, nil,
			map[string]uint64{"total_hits": 8, "over_limit": 2, "near_limit": 2}},
		{"already over: every hit is over", Decision{Hits: 3, Limit: 10, Before: 10, Over: true}, nil,
			map[string]uint64{"total_hits": 3, "over_limit": 3}},
		{"shadow rule over the limit", Decision{Hits: 5, Limit: 10, Before: 7, Over: true, Shadow: true}, nil,
			map[string]uint64{"total_hits": 5, "over_limit": 2, "near_limit": 2, "shadow_mode": 2}},
		{"shadow rule already over", Decision{Hits: 2, Limit: 10, Before: 12, Over: true, Shadow: true}, nil,
			map[string]uint64{"total_hits": 2, "over_limit": 2, "shadow_mode": 2}},
		// Issue 35's: 2 + 2 hits on a shadow limit of 3 (threshold 2), then 3 more.
		{"shadow rule crossing its limit with several hits", Decision{Hits: 2, Limit: 3, Shadow: true},
			[]Decision{{Hits: 2, Limit: 3, Before: 2, Over: true, Shadow: true}, {Hits: 3, Limit: 3, Before: 4, Over: true, Shadow: true}},
			map[string]uint64{"total_hits": 7, "within_limit": 2, "near_limit": 1, "over_limit": 4, "shadow_mode": 4}},
		{"local cache", Decision{Hits: 4, Limit: 10, FromCache: true, Over: true}, nil,
			map[string]uint64{"total_hits": 4, "over_limit": 4, "over_limit_with_local_cache": 4}},
		{"local cache, shadow rule", Decision{Hits: 1, Limit: 10, FromCache: true, Over: true, Shadow: true}, nil,
			map[string]uint64{"total_hits": 1, "over_limit": 1, "over_limit_with_local_cache": 1, "shadow_mode": 1}},
		{"check only (hits 0) counts nothing", Decision{Hits: 0, Limit: 10, Before: 11, Over: true}, nil,
			map[string]uint64{}},
		{"limit 0: every hit is over", Decision{Hits: 1, Limit: 0, Before: 0, Over: true}, nil,
			map[string]uint64{"total_hits": 1, "over_limit": 1}},
		// float32(5) * float32(0.8) = 4.0000000596..., floor 4, as envoyproxy computes it.
		{"threshold in float32", Decision{Hits: 1, Limit: 5, Before: 4}, nil,
			map[string]uint64{"total_hits": 1, "within_limit": 1, "near_limit": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			s := New(rec)
			r := s.Rule("d.k")
			for _, d := range append([]Decision{tt.d}, tt.then...) {
				s.Count(r, d)
			}
			s.Flush()
			want := map[string]uint64{}
			for k, v := range tt.want {
				want[p+k] = v
			}
			if got := rec.snapshot(); !maps.Equal(got, want) {
				t.Errorf("flushed %v\nwant    %v", got, want)
			}
		})
	}
}

func TestServiceStats(t *testing.T) {
	rec := newRecorder()
	s := New(rec, WithExtraTags(map[string]string{"env": "prod"}), WithMaxDomains(2))
	s.ConfigLoad(nil)
	s.ConfigLoad(nil)
	s.ConfigLoad(errTest)
	s.RedisError()
	s.ServiceError()
	s.GlobalShadowMode()
	for _, d := range []string{"a", "b", "c", "d", "a"} {
		s.DomainNotFound(d, 2)
	}
	s.Rule("d.k").Refund(7)
	s.Flush()
	const tag = ".__env=prod"
	want := map[string]uint64{
		"ratelimit.service.config_load_success" + tag:                   2,
		"ratelimit.service.config_load_error" + tag:                     1,
		"ratelimit.service.call.should_rate_limit.redis_error" + tag:    1,
		"ratelimit.service.call.should_rate_limit.service_error" + tag:  1,
		"ratelimit.service.global_shadow_mode" + tag:                    1,
		"ratelimit.service.rate_limit.a.domain_not_found" + tag:         4,
		"ratelimit.service.rate_limit.b.domain_not_found" + tag:         2,
		"ratelimit.service.rate_limit._overflow.domain_not_found" + tag: 4,
		"ratelimit.service.rate_limit.d.k.total_negative_hits" + tag:    7,
	}
	if got := rec.snapshot(); !maps.Equal(got, want) {
		t.Errorf("flushed %v\nwant    %v", got, want)
	}
	// A flush sends what changed since the last one.
	s.ServiceError()
	s.Flush()
	if got := rec.snapshot()["ratelimit.service.call.should_rate_limit.service_error"+tag]; got != 2 {
		t.Errorf("service_error after a second flush = %d, want 2", got)
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("bad config")
