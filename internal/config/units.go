package config

import (
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const day = 24 * time.Hour

// parseUnit maps a config unit name (case-insensitive) to the proto enum.
func parseUnit(name string) (rlsv3.RateLimitResponse_RateLimit_Unit, bool) {
	v, ok := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(name)]
	unit := rlsv3.RateLimitResponse_RateLimit_Unit(v)
	if !ok || unit == rlsv3.RateLimitResponse_RateLimit_UNKNOWN {
		return 0, false
	}
	return unit, true
}

// UnitDuration is the length of one unit, or zero for UNKNOWN and values
// outside the enum. Like envoyproxy, a month is 30 days and a year 365 days,
// so every window stays aligned to the Unix epoch.
func UnitDuration(unit rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	switch unit {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return time.Second
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return time.Minute
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return time.Hour
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return day
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * day
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * day
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * day
	default:
		return 0
	}
}
