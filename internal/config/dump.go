package config

import (
	"fmt"
	"strings"
)

// Dump renders every rule, one a line, domains sorted and descriptors in
// config order. Each line starts like envoyproxy's /rlconfig
// ("key: unit=MINUTE requests_per_unit=10, shadow_mode: false") so tools
// that read it keep working; ratelimitd's own fields follow.
func (c *Config) Dump() string {
	if c == nil {
		return ""
	}
	var sb strings.Builder
	c.EachRule(func(r *Rule) { dumpRule(&sb, r) })
	return sb.String()
}

// dumpRule writes one line per limit: a rate_limits descriptor has several,
// each naming its index.
func dumpRule(sb *strings.Builder, r *Rule) {
	fmt.Fprintf(sb, "%s: unit=%s requests_per_unit=%d, shadow_mode: %t", r.StatKey, r.Unit, r.RequestsPerUnit, r.ShadowMode)
	if r.Unlimited {
		sb.WriteString(", unlimited: true")
	} else {
		fmt.Fprintf(sb, ", algorithm=%s period=%s", r.Limit.Algorithm, r.Limit.Period)
		if r.Limit.Burst != 0 {
			fmt.Fprintf(sb, " burst=%d", r.Limit.Burst)
		}
		if r.Limit.RefillInterval != 0 {
			fmt.Fprintf(sb, " refill_interval=%s", r.Limit.RefillInterval)
		}
		if r.Limit.MaxDebt != 0 {
			fmt.Fprintf(sb, " max_debt=%d", r.Limit.MaxDebt)
		}
	}
	if len(r.Limits()) > 1 {
		fmt.Fprintf(sb, ", limit=%d/%d", r.Index+1, len(r.Limits()))
	}
	if r.Name != "" {
		fmt.Fprintf(sb, ", name=%q", r.Name)
	}
	if len(r.Replaces) > 0 {
		fmt.Fprintf(sb, ", replaces=%q", r.Replaces)
	}
	if r.OnStoreError != StoreErrorUnavailable {
		fmt.Fprintf(sb, ", on_store_error=%s", r.OnStoreError)
	}
	if r.Lease != LeaseUnset {
		fmt.Fprintf(sb, ", lease: %s", r.Lease)
	}
	for _, flag := range []struct {
		on   bool
		name string
	}{
		{r.QuotaMode, "quota_mode"},
		{r.DetailedMetric, "detailed_metric"},
		{r.ValueToMetric, "value_to_metric"},
		{r.ShareThreshold, "share_threshold"},
	} {
		if flag.on {
			fmt.Fprintf(sb, ", %s: true", flag.name)
		}
	}
	fmt.Fprintf(sb, " (%s)\n", r.Source)
}
