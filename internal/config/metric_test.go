package config

import "testing"

func TestMetricKey(t *testing.T) {
	c := parseOne(t, `
domain: d
descriptors:
  - key: a
    value: x*
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    value: y*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: c
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: e
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: h
    value: z*
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: i
    value: w*
    share_threshold: true
    descriptors:
      - key: j
        detailed_metric: true
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: n
    value_to_metric: true
    descriptors:
      - key: o
        value: p*
        rate_limit: {unit: second, requests_per_unit: 1}
      - key: q
        value: exact
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	tests := []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"plain key is the stat key", []Entry{{"plain", "v"}}, "d.plain"},
		{"wildcard without value_to_metric keeps the pattern", []Entry{{"b", "y1"}}, "d.b_y*"},
		{"wildcard with value_to_metric uses the value", []Entry{{"a", "x1"}}, "d.a_x1"},
		{"key-only with value_to_metric", []Entry{{"c", "v"}}, "d.c_v"},
		{"key-only with value_to_metric, empty value", []Entry{{"c", ""}}, "d.c"},
		{"detailed", []Entry{{"e", "v"}}, "d.e_v"},
		{"detailed keeps envoyproxy's trailing underscore", []Entry{{"e", ""}}, "d.e_"},
		{"share_threshold beats value_to_metric", []Entry{{"h", "z9"}}, "d.h_z*"},
		{"detailed with a shared level", []Entry{{"i", "w1"}, {"j", "q"}}, "d.i_w*.j_q"},
		{"detailed with a shared level, empty value", []Entry{{"i", "w1"}, {"j", ""}}, "d.i_w*.j"},
		{"value_to_metric on the parent only", []Entry{{"n", "1"}, {"o", "p2"}}, "d.n_1.o_p*"},
		{"exact child under value_to_metric parent", []Entry{{"n", "1"}, {"q", "exact"}}, "d.n_1.q_exact"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Match("d", tt.entries)
			if r == nil {
				t.Fatalf("no rule for %v", tt.entries)
			}
			if got := r.MetricKey(tt.entries); got != tt.want {
				t.Errorf("MetricKey = %q, want %q (StatKey %q)", got, tt.want, r.StatKey)
			}
		})
	}
}

func TestMetricKeyOfOverride(t *testing.T) {
	r, err := OverrideRule("d", []Entry{{"k", "v"}, {"k2", ""}}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.MetricKey([]Entry{{"k", "v"}, {"k2", ""}}); got != "d.k_v.k2" {
		t.Errorf("MetricKey = %q, want d.k_v.k2", got)
	}
}
