package config

import "testing"

func TestCountRules(t *testing.T) {
	files := []File{
		{Name: "a.yaml", Data: []byte(`domain: a
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: nested
        rate_limit: {unlimited: true}
      - key: no_rule
  - key: other
`)},
		{Name: "b.yaml", Data: []byte("domain: b\n")},
		{Name: "c.yaml", Data: []byte("domain: a\ndescriptors:\n  - key: merged\n    rate_limit: {unit: day, requests_per_unit: 9}\n")},
	}
	cfg, err := Parse(files, WithMergeDomains(true))
	if err != nil {
		t.Fatal(err)
	}
	for domain, want := range map[string]int{"a": 3, "b": 0, "missing": 0} {
		if got := cfg.CountRules(domain); got != want {
			t.Errorf("CountRules(%q) = %d, want %d", domain, got, want)
		}
	}
	var nilCfg *Config
	if got := nilCfg.CountRules("a"); got != 0 {
		t.Errorf("nil config: %d rules", got)
	}
}
