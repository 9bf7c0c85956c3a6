package config

import (
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

const calendarYAML = `
domain: d
descriptors:
  - key: fw
    rate_limit: {unit: month, requests_per_unit: 10}
  - key: sw
    rate_limit: {unit: month, requests_per_unit: 10, algorithm: sliding_window}
  - key: quarter
    rate_limit: {unit: month, unit_multiplier: 3, requests_per_unit: 10}
  - key: tb
    rate_limit: {unit: month, requests_per_unit: 10, algorithm: token_bucket}
  - key: day
    rate_limit: {unit: day, requests_per_unit: 10}
`

// With WithCalendarMonths, monthly window rules count calendar months
// (Months of them), their keys say so ("1mo", "3mo") and read back as
// such; buckets and other units keep their fixed period and key. Without
// it, no rule does.
func TestCalendarRules(t *testing.T) {
	for _, on := range []bool{true, false} {
		c := parseOne(t, calendarYAML, WithCalendarMonths(on))
		for _, tt := range []struct {
			key      string
			calendar bool
			months   int64
			on, off  string // the key's end with the setting on, off
		}{
			{"fw", true, 1, ":fixed_window.int:1mo", ":fixed_window.int:2592000s"},
			{"sw", true, 1, ":sliding_window:1mo", ":sliding_window:2592000s"},
			{"quarter", true, 3, ":fixed_window.int:3mo", ":fixed_window.int:7776000s"},
			{"tb", false, 0, ":token_bucket:2592000s", ":token_bucket:2592000s"},
			{"day", false, 0, ":fixed_window.int:86400s", ":fixed_window.int:86400s"},
		} {
			r := c.Match("d", []Entry{{tt.key, "v"}})
			want := tt.calendar && on
			if r == nil || r.Limit.Calendar != want || (want && int64(r.Limit.Period/algorithms.Month) != tt.months) {
				t.Fatalf("on=%v %s: rule %+v, want calendar %v", on, tt.key, r, want)
			}
			suffix := tt.off
			if on {
				suffix = tt.on
			}
			b := KeyBuilder{Prefix: "rl:"}
			key := b.Key(r, []Entry{{tt.key, "v"}})
			pk, err := b.ParseKey(key)
			if !strings.HasSuffix(key, suffix) || err != nil || pk.Calendar != want || pk.Period != r.Limit.Period ||
				pk.Algorithm != r.Limit.Algorithm.String() {
				t.Errorf("on=%v %s: key %q, want it to end %q; parsed %+v %v", on, tt.key, key, suffix, pk, err)
			}
		}
	}
}

// A limit calendar months cannot hold, and lease: true on a calendar
// window that cannot lease, fail the load with the file, line and setting,
// rather than loading a rule that silently does something else.
func TestCalendarErrors(t *testing.T) {
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"too many months", `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: month, unit_multiplier: 600, requests_per_unit: 10}
`, "f.yaml:4: rate_limit: USE_CALENDAR_MONTH_RATE_LIMIT: a calendar period must be 1 to"},
		{"a sliding window of months cannot lease", `
domain: d
descriptors:
  - key: k
    lease: true
    rate_limit: {unit: month, requests_per_unit: 10, algorithm: sliding_window}
`, "f.yaml:4: lease: USE_CALENDAR_MONTH_RATE_LIMIT: a sliding_window of calendar months cannot lease"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]File{{Name: "f.yaml", Data: []byte(tt.yaml)}}, WithCalendarMonths(true))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if _, err := Parse([]File{{Name: "f.yaml", Data: []byte(tt.yaml)}}); err != nil {
				t.Errorf("without calendar months: %v", err)
			}
		})
	}
	// A calendar fixed window leases.
	c := parseOne(t, `
domain: d
descriptors:
  - key: k
    lease: true
    rate_limit: {unit: month, requests_per_unit: 10}
`, WithCalendarMonths(true))
	if r := c.Match("d", []Entry{{"k", "v"}}); r == nil || !r.Limit.Calendar || !r.Leases(false) {
		t.Errorf("a calendar fixed_window with lease: true does not lease: %+v", r)
	}
}
