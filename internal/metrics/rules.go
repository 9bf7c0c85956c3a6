package metrics

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// WatchRules exports the configured limit of every rule in force, read from
// current at each scrape, so that alerts can compare a rule's hits with its
// limit (utilisation):
//
//	ratelimitd_rule_limit{domain, rule, limit_index}          requests per window
//	ratelimitd_rule_window_seconds{domain, rule, limit_index} the window (period)
//
// rule is the stats key, as in ratelimitd_total_hits_total; limit_index is
// the limit's place in rate_limits (0 for a rate_limit). Unlimited rules
// have none.
func (m *Metrics) WatchRules(current func() *config.Config) error {
	if m.reg == nil {
		return errors.New("metrics: WatchRules needs New's registry")
	}
	return m.reg.Register(&ruleLimits{current: current})
}

var (
	ruleLimitDesc = prometheus.NewDesc("ratelimitd_rule_limit",
		"Requests (hits) a rule admits per window, by stats key and place in rate_limits.",
		[]string{"domain", "rule", "limit_index"}, nil)
	ruleWindowDesc = prometheus.NewDesc("ratelimitd_rule_window_seconds",
		"A rule's window (period) in seconds.",
		[]string{"domain", "rule", "limit_index"}, nil)
)

type ruleLimits struct{ current func() *config.Config }

func (c *ruleLimits) Describe(ch chan<- *prometheus.Desc) {
	ch <- ruleLimitDesc
	ch <- ruleWindowDesc
}

func (c *ruleLimits) Collect(ch chan<- prometheus.Metric) {
	type key struct{ domain, rule, index string }
	seen := map[key]bool{}
	c.current().EachRule(func(r *config.Rule) {
		k := key{r.Domain, r.StatKey, strconv.Itoa(r.Index)}
		if r.Unlimited || seen[k] {
			return
		}
		seen[k] = true
		for _, g := range []struct {
			desc *prometheus.Desc
			v    float64
		}{{ruleLimitDesc, float64(r.Limit.Requests)}, {ruleWindowDesc, r.Limit.Period.Seconds()}} {
			// A label value that is not UTF-8 cannot be exported; the
			// loaders do not let one through, but a scrape must not fail.
			if m, err := prometheus.NewConstMetric(g.desc, prometheus.GaugeValue, g.v, k.domain, k.rule, k.index); err == nil {
				ch <- m
			}
		}
	})
}
