package daemon

import (
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// rlqsSettings are the RLQS_* settings (docs/rlqs.md).
type rlqsSettings struct {
	// Enabled is RLQS_ENABLED: serve envoy.service.rate_limit_quota.v3 on
	// the gRPC port.
	Enabled    bool
	Interval   time.Duration
	Fraction   float64
	MaxBlock   uint64
	Margin     time.Duration
	MaxBuckets int
}

func defaultRLQSSettings() rlqsSettings {
	return rlqsSettings{
		Enabled:    true,
		Interval:   rlqs.DefaultReportingInterval,
		Fraction:   rlqs.DefaultFraction,
		MaxBlock:   rlqs.DefaultMaxBlock,
		Margin:     rlqs.DefaultExpiryMargin,
		MaxBuckets: rlqs.DefaultMaxBuckets,
	}
}

func readRLQSSettings(env *envReader) rlqsSettings {
	d := defaultRLQSSettings()
	s := rlqsSettings{
		Enabled:    env.boolean("RLQS_ENABLED", d.Enabled),
		Interval:   env.duration("RLQS_REPORTING_INTERVAL", d.Interval),
		Fraction:   env.fraction("RLQS_FRACTION", d.Fraction),
		MaxBlock:   uint64(env.integer("RLQS_MAX_BLOCK", int(d.MaxBlock), 1, 1<<32-1)),
		Margin:     env.duration("RLQS_EXPIRY_MARGIN", d.Margin),
		MaxBuckets: env.integer("RLQS_MAX_BUCKETS", d.MaxBuckets, 1, 1<<30),
	}
	if s.Interval < time.Second {
		v, _ := env.raw("RLQS_REPORTING_INTERVAL")
		env.fail("RLQS_REPORTING_INTERVAL", v, "at least 1s (Envoy's filter reports in whole seconds)")
	}
	if s.Fraction == 0 {
		env.fail("RLQS_FRACTION", "0", "a number above 0 and at most 1")
	}
	return s
}

// startRLQS registers the Rate Limit Quota Service on the gRPC server, its
// blocks charged in the store under the decorators (a block is already a
// lease; the local cache's denials are the rate limit service's).
func (a *app) startRLQS(m *metrics.Metrics) error {
	set := a.set
	if !set.RLQS.Enabled {
		return nil
	}
	lender, ok := a.store.(store.Lender)
	if !ok {
		return fmt.Errorf("rlqs: the %T store cannot lend blocks of its counters", a.store)
	}
	srv := rlqs.New(a.watcher, lender,
		rlqs.WithReportingInterval(set.RLQS.Interval),
		rlqs.WithFraction(set.RLQS.Fraction),
		rlqs.WithMaxBlock(set.RLQS.MaxBlock),
		rlqs.WithExpiryMargin(set.RLQS.Margin),
		rlqs.WithMaxBuckets(set.RLQS.MaxBuckets),
		rlqs.WithLimits(set.MaxEntries, set.MaxValueLen),
		rlqs.WithKeyBuilder(config.KeyBuilder{Prefix: set.CacheKeyPrefix}),
		rlqs.WithShadowMode(set.ShadowMode),
		rlqs.WithStoreTimeout(set.RedisTimeout),
		rlqs.WithLogger(a.log.Named("rlqs")),
	)
	if err := srv.RegisterMetrics(m.Registry()); err != nil {
		srv.Shutdown()
		return fmt.Errorf("rlqs metrics: %w", err)
	}
	srv.Register(a.grpc)
	a.rlqs = srv
	return nil
}

// stopRLQS ends the RLQS streams so that a graceful stop need not wait
// for them.
func (a *app) stopRLQS() {
	if a.rlqs != nil {
		a.rlqs.Shutdown()
	}
}
