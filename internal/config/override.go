package config

import (
	"fmt"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// OverrideRule is the rule for a request descriptor that carries its own
// limit (RateLimitDescriptor.limit), which envoyproxy applies instead of the
// configuration whenever the domain is configured. Like envoyproxy it is a
// fixed window, never shadow mode, with the stats key
// domain.key_value.key2_value2. Its counters are shared with a configured
// fixed-window rule of the same period for the same entries, as in
// envoyproxy.
func OverrideRule(domain string, entries []Entry, unit rlsv3.RateLimitResponse_RateLimit_Unit, requestsPerUnit uint32) (*Rule, error) {
	period := UnitDuration(unit)
	if period == 0 {
		return nil, fmt.Errorf("config: descriptor limit override: unknown unit %s", unit)
	}
	var sb strings.Builder
	sb.WriteString(domain)
	for _, e := range entries {
		sb.WriteByte('.')
		sb.WriteString(e.Key)
		if e.Value != "" {
			sb.WriteByte('_')
			sb.WriteString(e.Value)
		}
	}
	r := &Rule{
		Domain:          domain,
		StatKey:         sb.String(),
		Unit:            unit,
		RequestsPerUnit: requestsPerUnit,
		Limit: algorithms.Limit{
			Algorithm: algorithms.FixedWindow,
			Requests:  uint64(requestsPerUnit),
			Period:    period,
		},
	}
	r.key = newKeyParts(r)
	r.limits = []*Rule{r}
	return r, nil
}
