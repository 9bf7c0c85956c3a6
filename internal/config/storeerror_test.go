package config

import (
	"strings"
	"testing"
)

func TestParseOnStoreError(t *testing.T) {
	c := parseOne(t, `
domain: d
descriptors:
  - key: default
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: allow
    rate_limit: {unit: second, requests_per_unit: 1, on_store_error: allow}
  - key: deny
    rate_limit: {unit: second, requests_per_unit: 1, on_store_error: Deny}
  - key: unavailable
    rate_limit: {unit: second, requests_per_unit: 1, on_store_error: unavailable}
`)
	for key, want := range map[string]StoreErrorAction{
		"default": StoreErrorUnavailable, "allow": StoreErrorAllow, "deny": StoreErrorDeny, "unavailable": StoreErrorUnavailable,
	} {
		r := c.Match("d", []Entry{{key, "x"}})
		if r == nil || r.OnStoreError != want {
			t.Errorf("%s: rule %+v, want on_store_error %s", key, r, want)
		}
	}
	if !strings.Contains(c.Dump(), "d.deny: unit=SECOND requests_per_unit=1, shadow_mode: false, algorithm=fixed_window period=1s, on_store_error=deny (f.yaml:8)") {
		t.Errorf("Dump lacks on_store_error:\n%s", c.Dump())
	}
	if strings.Contains(c.Dump(), "on_store_error=unavailable") {
		t.Errorf("Dump shows the default:\n%s", c.Dump())
	}
}

func TestParseOnStoreErrorBad(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown action", "unit: second, requests_per_unit: 1, on_store_error: open", `f.yaml:4: descriptors[0].rate_limit.on_store_error: want unavailable, allow or deny, got string "open"`},
		{"null", "unit: second, requests_per_unit: 1, on_store_error: null", `want unavailable, allow or deny, got null`},
		{"a boolean", "unit: second, requests_per_unit: 1, on_store_error: true", `want unavailable, allow or deny, got bool true`},
		{"with unlimited", "unlimited: true, on_store_error: allow", `descriptors[0].rate_limit.on_store_error: must not be set when unlimited is true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {" + tt.body + "}\n"
			_, err := Parse([]File{{Name: "f.yaml", Data: []byte(doc)}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
