package rlqstest

import (
	"math"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// tokenBucket is Envoy's AtomicTokenBucketImpl
// (source/common/common/token_bucket_impl.h): the tokens at time t are
// min(max, (t - since) * rate), and taking one moves since forward by
// 1/rate. It refills continuously, not in steps of tokens_per_fill.
type tokenBucket struct {
	max, rate float64
	since     float64 // seconds from epoch
	epoch     time.Time
}

// newTokenBucket is global_client_impl.cc's createTokenBucketFromAction:
// the rate is tokens_per_fill over fill_interval truncated to whole
// seconds (absl::ToInt64Seconds; below a second it divides by zero, and
// the bucket then admits everything). A bucket replacing an existing one
// starts at max_tokens times the old one's remaining share of its own
// max_tokens, truncated (Envoy PR #37624); without one it starts full.
func newTokenBucket(p *typev3.TokenBucket, old *tokenBucket, now time.Time) *tokenBucket {
	fill := p.GetFillInterval().AsDuration().Truncate(time.Second) / time.Second
	perFill := float64(p.GetTokensPerFill().GetValue())
	rate := perFill / float64(fill) // +Inf (or NaN for 0/0) below a second, as in C++
	maxTokens := float64(p.GetMaxTokens())
	initial := maxTokens
	if old != nil {
		initial = math.Trunc(maxTokens * (old.remaining(now) / old.max))
	}
	tb := &tokenBucket{max: maxTokens, rate: rate, epoch: now}
	tb.since = -initial / rate
	if math.IsInf(rate, 1) || math.IsNaN(tb.since) {
		tb.since = 0
	}
	return tb
}

// tokens is the bucket's min(max, elapsed * rate): std::min(max, NaN) is
// max, which is how a bucket of infinite rate stays full.
func (tb *tokenBucket) tokens(now time.Time) float64 {
	t := now.Sub(tb.epoch).Seconds()
	v := (t - tb.since) * tb.rate
	if v < tb.max {
		return v
	}
	return tb.max
}

// remaining is remainingTokens().
func (tb *tokenBucket) remaining(now time.Time) float64 { return tb.tokens(now) }

// consume takes one token if a whole one is there.
func (tb *tokenBucket) consume(now time.Time) bool {
	total := tb.tokens(now)
	if !(total >= 1) {
		return false
	}
	t := now.Sub(tb.epoch).Seconds()
	tb.since = t - (total-1)/tb.rate
	return true
}
