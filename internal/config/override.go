package config

import (
	"fmt"
	"strings"
	"time"

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

// OverrideRule is the package's OverrideRule under this configuration: a
// period of multiplier units (ratelimitd's extension; 0 and 1 are one
// unit), and with WithCalendarMonths a monthly limit in calendar months,
// as envoyproxy applies USE_CALENDAR_MONTH_RATE_LIMIT to a request's own
// limit too.
func (c *Config) OverrideRule(domain string, entries []Entry, unit rlsv3.RateLimitResponse_RateLimit_Unit, requestsPerUnit, multiplier uint32) (*Rule, error) {
	r, err := OverrideRule(domain, entries, unit, requestsPerUnit)
	if err != nil {
		return nil, err
	}
	if multiplier > 1 {
		r.Limit.Period *= time.Duration(multiplier)
	}
	r.Limit.Calendar = c.calendarMonths && unit == rlsv3.RateLimitResponse_RateLimit_MONTH
	r.OnStoreError = c.storeError
	if err := r.Limit.Validate(); err != nil {
		return nil, fmt.Errorf("config: descriptor limit override: unit_multiplier %d: %w", multiplier, err)
	}
	r.key = newKeyParts(r) // the period is part of the key
	return r, nil
}
