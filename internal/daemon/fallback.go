package daemon

import (
	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
	"github.com/ratelimitd/ratelimitd/pkg/store/stack"
)

// fallbackOption is the on_store_error: local decorator's place in the
// stack (pkg/store/stack adds it on Redis only): LOCAL_FALLBACK_* and, per
// rule of the config in force (rules), the hits it charged to Redis after
// an outage and those it never will.
func fallbackOption(set settings, m *metrics.Metrics, rules func() *config.Config) stack.Option {
	keys := config.KeyBuilder{Prefix: set.CacheKeyPrefix}
	ruleOf := func(key string) (string, string) {
		if rules == nil {
			return "", ""
		}
		return rules().RuleOfKey(keys, key)
	}
	return stack.WithFallback(keys.PresenceKey(), set.Fallback.Heartbeat,
		fallback.WithReplicas(set.Fallback.Replicas),
		fallback.WithReconciled(func(key string, hits uint64) {
			domain, rule := ruleOf(key)
			m.LocalReconciled(domain, rule, hits)
		}),
		fallback.WithDropped(func(key string, hits uint64) {
			domain, rule := ruleOf(key)
			m.LocalDropped(domain, rule, hits)
		}),
	)
}

// startFallback starts the replicas' presence once a config in force has a
// local rule, so that the others count this replica before it decides a
// single request locally.
func (a *app) startFallback(cfg *config.Config) {
	if a.fallback != nil && cfg.LocalFallback() {
		a.fallback.Start()
	}
}
