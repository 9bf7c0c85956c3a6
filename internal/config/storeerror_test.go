package config

import (
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
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
  - key: local
    rate_limit: {unit: second, requests_per_unit: 1, on_store_error: LOCAL}
`)
	for key, want := range map[string]StoreErrorAction{
		"default": StoreErrorUnavailable, "allow": StoreErrorAllow, "deny": StoreErrorDeny, "unavailable": StoreErrorUnavailable, "local": StoreErrorLocal,
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
		{"unknown action", "unit: second, requests_per_unit: 1, on_store_error: open", `f.yaml:4: descriptors[0].rate_limit.on_store_error: want unavailable, allow, deny or local, got string "open"`},
		{"null", "unit: second, requests_per_unit: 1, on_store_error: null", `want unavailable, allow, deny or local, got null`},
		{"a boolean", "unit: second, requests_per_unit: 1, on_store_error: true", `want unavailable, allow, deny or local, got bool true`},
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

// WithStoreErrorDefault (ON_STORE_ERROR) is the on_store_error of every
// limit that does not set one, a request's own limit included; one that
// does keeps its own. LocalFallback tells whether any rule is local.
func TestStoreErrorDefault(t *testing.T) {
	doc := `
domain: d
descriptors:
  - key: unset
    rate_limits:
      - {unit: second, requests_per_unit: 1}
      - {unit: minute, requests_per_unit: 5, on_store_error: deny}
  - key: set
    rate_limit: {unit: second, requests_per_unit: 1, on_store_error: unavailable}
  - key: free
    rate_limit: {unlimited: true}
`
	for _, def := range []StoreErrorAction{StoreErrorUnavailable, StoreErrorAllow, StoreErrorLocal} {
		c, err := Parse([]File{{Name: "f.yaml", Data: []byte(doc)}}, WithStoreErrorDefault(def))
		if err != nil {
			t.Fatal(err)
		}
		limits := c.Match("d", []Entry{{"unset", "x"}}).Limits()
		if limits[0].OnStoreError != def || limits[1].OnStoreError != StoreErrorDeny {
			t.Errorf("default %s: rate_limits got %s and %s, want %s and deny", def, limits[0].OnStoreError, limits[1].OnStoreError, def)
		}
		if got := c.Match("d", []Entry{{"set", "x"}}).OnStoreError; got != StoreErrorUnavailable {
			t.Errorf("default %s: a rule saying unavailable got %s", def, got)
		}
		if got := c.Match("d", []Entry{{"free", "x"}}).OnStoreError; got != StoreErrorUnavailable {
			t.Errorf("default %s: an unlimited rule got %s, want none (unavailable)", def, got)
		}
		own, err := c.OverrideRule("d", []Entry{{"own", "x"}}, rlsv3.RateLimitResponse_RateLimit_SECOND, 3, 1)
		if err != nil || own.OnStoreError != def {
			t.Errorf("default %s: a request's own limit got %v %v", def, own, err)
		}
		if got := c.LocalFallback(); got != (def == StoreErrorLocal) {
			t.Errorf("default %s: LocalFallback %t", def, got)
		}
	}
	if a, err := ParseStoreErrorAction("Local"); err != nil || a != StoreErrorLocal {
		t.Errorf("ParseStoreErrorAction(Local) = %s %v", a, err)
	}
	if _, err := ParseStoreErrorAction("open"); err == nil || !strings.Contains(err.Error(), storeErrorActions) {
		t.Errorf("ParseStoreErrorAction(open): %v, want the values listed", err)
	}
}
