package schema_test

import (
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// rl is a file with one descriptor whose rate_limit is the flow mapping
// body; desc is one whose other fields are body.
func rl(body string) string {
	return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {" + body + "}\n"
}

func desc(body string) string {
	return "domain: d\ndescriptors:\n  - {key: k, " + body + "}\n"
}

var schemaLoaderTests = []struct {
	name  string
	doc   string
	valid bool
}{
	{"minimal", "domain: d\n", true},
	{"nested with wildcard", "domain: d\ndescriptors:\n  - key: path\n    value: /api/*\n    descriptors:\n      - key: user\n        rate_limit: {unit: Minute, requests_per_unit: 10}\n", true},
	{"every extension", rl("unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20, unit_multiplier: 2, refill_interval: 100ms, max_debt: 5"), true},
	{"unlimited", rl("unlimited: true"), true},
	{"unlimited with an empty unit, as envoyproxy allows", rl("unlimited: true, unit: ''"), true},
	{"unlimited with requests_per_unit", rl("unlimited: true, requests_per_unit: 3"), true},
	{"flags and metadata", "domain: d\ndescriptors:\n  - key: k\n    value: a*\n    shadow_mode: yes\n    share_threshold: true\n    detailed_metric: true\n    metadata: {x: 1}\n    rate_limit: {unit: hour, requests_per_unit: 1, name: r, replaces: [{name: other}]}\n", true},
	{"bare scalar value and domain", "domain: 42\ndescriptors:\n  - key: code\n    value: 500\n    rate_limit: {unit: day, requests_per_unit: 0}\n", true},
	{"YAML 1.1 booleans in any case", desc("shadow_mode: On, quota_mode: N, value_to_metric: yEs"), true},
	{"null is the same as absent", desc("value: null, shadow_mode: null, metadata: null, descriptors: null, rate_limit: null"), true},
	{"null rate_limit fields", rl("unit: second, requests_per_unit: null, name: null, unlimited: null, max_debt: null, refill_interval: null"), true},
	{"algorithm names in any case", rl("unit: second, requests_per_unit: 1, algorithm: Token_Bucket, burst: 2"), true},
	{"zero refill_interval and max_debt on a window", rl("unit: second, requests_per_unit: 1, refill_interval: 0, max_debt: 0"), true},
	{"Go duration forms", rl("unit: hour, requests_per_unit: 1, algorithm: token_bucket, refill_interval: 1m0.5s"), true},
	{"the longest window", rl("unit: year, requests_per_unit: 1, unit_multiplier: 50"), true},
	{"metadata with lists, nulls and non-string keys", desc("metadata: {a: [1, null, {b: true}], 7: x}"), true},
	{"anchors and merge keys", "domain: d\ndescriptors:\n  - &base {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n  - <<: *base\n    value: v\n", true},
	{"rate_limits", "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: second, requests_per_unit: 10, name: s}\n      - {unit: day, requests_per_unit: 1000, algorithm: gcra, burst: 5, replaces: [{name: other}]}\n", true},
	{"rate_limits null beside rate_limit", desc("rate_limit: {unit: second}, rate_limits: null"), true},
	{"rate_limit null beside rate_limits", desc("rate_limit: null, rate_limits: [{unit: second}]"), true},
	{"rate_limits and rate_limit", desc("rate_limit: {unit: second}, rate_limits: [{unit: second}]"), false},
	{"empty rate_limits", desc("rate_limits: []"), false},
	{"rate_limits not a list", desc("rate_limits: {unit: second}"), false},
	{"rate_limits item unlimited", desc("rate_limits: [{unlimited: true}]"), false},
	{"rate_limits item unlimited false", desc("rate_limits: [{unit: second, unlimited: false}]"), false},
	{"rate_limits item without unit", desc("rate_limits: [{unit: second}, {requests_per_unit: 1}]"), false},
	{"rate_limits item unknown key", desc("rate_limits: [{unit: second, per: 1}]"), false},
	{"rate_limits item burst on a window", desc("rate_limits: [{unit: second, burst: 2}]"), false},
	{"rate_limits over 16", desc("rate_limits: [" + strings.Repeat("{unit: second}, ", 16) + "{unit: day}]"), false},
	{"empty file", "", false},
	{"a list, not a mapping", "- domain: d\n", false},
	{"missing domain", "descriptors: []\n", false},
	{"empty domain", "domain: \"\"\n", false},
	{"null domain", "domain: null\n", false},
	{"unknown top-level key", "domain: d\nextra: 1\n", false},
	{"descriptors not a list", "domain: d\ndescriptors: {key: k}\n", false},
	{"a null descriptor", "domain: d\ndescriptors: [null]\n", false},
	{"unknown descriptor key", "domain: d\ndescriptors:\n  - key: k\n    valeu: x\n", false},
	{"unknown rate_limit key", rl("unit: second, requests_per_unit: 1, per: 2"), false},
	{"missing key", "domain: d\ndescriptors:\n  - value: x\n", false},
	{"null key", desc("key: null"), false},
	{"value not a scalar", desc("value: [a]"), false},
	{"quoted true is not a boolean", desc(`shadow_mode: "true"`), false},
	{"a number is not a boolean", desc("detailed_metric: 1"), false},
	{"rate_limit not a mapping", desc("rate_limit: [unit, second]"), false},
	{"bad unit", rl("unit: fortnight, requests_per_unit: 1"), false},
	{"missing unit", rl("requests_per_unit: 1"), false},
	{"empty unit", rl("unit: '', requests_per_unit: 1"), false},
	{"an empty rate_limit", rl(""), false},
	{"unlimited with a unit", rl("unlimited: true, unit: second"), false},
	{"unlimited (yes) with a unit", rl("unlimited: YES, unit: second"), false},
	{"unlimited with an algorithm field", rl("unlimited: true, max_debt: 0"), false},
	{"negative requests", rl("unit: second, requests_per_unit: -1"), false},
	{"requests over uint32", rl("unit: second, requests_per_unit: 4294967296"), false},
	{"quoted requests", rl("unit: second, requests_per_unit: '5'"), false},
	{"unknown algorithm", rl("unit: second, requests_per_unit: 1, algorithm: magic"), false},
	{"null algorithm", rl("unit: second, requests_per_unit: 1, algorithm: null"), false},
	{"burst on a window", rl("unit: second, requests_per_unit: 1, burst: 5"), false},
	{"zero burst", rl("unit: second, requests_per_unit: 1, algorithm: gcra, burst: 0"), false},
	{"burst over the exact-math bound", rl("unit: second, requests_per_unit: 1, algorithm: gcra, burst: 1099511627777"), false},
	{"max_debt on gcra", rl("unit: second, requests_per_unit: 1, algorithm: gcra, max_debt: 5"), false},
	{"refill_interval on a window", rl("unit: minute, requests_per_unit: 1, refill_interval: 1s"), false},
	{"zero multiplier", rl("unit: second, requests_per_unit: 1, unit_multiplier: 0"), false},
	{"null multiplier", rl("unit: second, requests_per_unit: 1, unit_multiplier: null"), false},
	{"a window over 50 years", rl("unit: year, requests_per_unit: 1, unit_multiplier: 51"), false},
	{"a window over 50 years in weeks", rl("unit: WEEK, requests_per_unit: 1, unit_multiplier: 2608"), false},
	{"bad refill interval", rl("unit: second, requests_per_unit: 1, algorithm: token_bucket, refill_interval: soon"), false},
	{"refill interval without a unit", rl("unit: second, requests_per_unit: 1, algorithm: token_bucket, refill_interval: 5"), false},
	{"negative refill interval", rl("unit: second, requests_per_unit: 1, algorithm: token_bucket, refill_interval: -1ms"), false},
	{"replaces without a name", rl("unit: second, requests_per_unit: 1, replaces: [{}]"), false},
	{"replaces with an empty name", rl("unit: second, requests_per_unit: 1, replaces: [{name: ''}]"), false},
	{"share_threshold without a wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: plain\n    share_threshold: true\n", false},
	{"share_threshold (y) without a value", desc("share_threshold: y"), false},
	{"metadata not a mapping", "domain: d\ndescriptors:\n  - key: k\n    metadata: [1, 2]\n", false},
	{"value_regex", desc(`value_regex: '/api/v[0-9]+/.*'`), true},
	{"value_regex as a bare number", desc("value_regex: 500"), true},
	{"value_regex null is absent", desc("value_regex: null"), true},
	{"value_regex of the longest length, in characters", desc("value_regex: " + strings.Repeat("é", 1024)), true},
	{"share_threshold on a value_regex", desc("value_regex: a.*, share_threshold: true"), true},
	{"on_store_error", rl("unit: second, requests_per_unit: 1, on_store_error: allow"), true},
	{"on_store_error in any case", rl("unit: second, requests_per_unit: 1, on_store_error: DENY"), true},
	{"on_store_error unavailable", rl("unit: second, requests_per_unit: 1, on_store_error: unavailable"), true},
	{"value and value_regex", desc("value: a, value_regex: a.*"), false},
	{"value null and value_regex", desc("value: null, value_regex: a.*"), false},
	{"an empty value_regex", desc("value_regex: ''"), false},
	{"a value_regex too long", desc("value_regex: " + strings.Repeat("a", 1025)), false},
	{"a value_regex not a scalar", desc("value_regex: [a]"), false},
	{"share_threshold with a null value_regex", desc("value_regex: null, share_threshold: true"), false},
	{"unknown on_store_error", rl("unit: second, requests_per_unit: 1, on_store_error: open"), false},
	{"null on_store_error", rl("unit: second, requests_per_unit: 1, on_store_error: null"), false},
	{"on_store_error as a boolean", rl("unit: second, requests_per_unit: 1, on_store_error: true"), false},
	{"on_store_error with unlimited", rl("unlimited: true, on_store_error: allow"), false},
	{"lease", desc("lease: true, rate_limit: {unit: second, requests_per_unit: 10}"), true},
	{"lease false on sliding_log", desc("lease: false, rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding_log}"), true},
	{"lease null on a zero limit", desc("lease: null, rate_limit: {unit: second, requests_per_unit: 0}"), true},
	{"lease on every leasable algorithm", desc("lease: yes, rate_limits: [{unit: second, requests_per_unit: 1}, {unit: second, requests_per_unit: 1, algorithm: sliding_window}, {unit: second, requests_per_unit: 1, algorithm: GCRA, burst: 3}, {unit: second, requests_per_unit: 1, algorithm: leaky_bucket}, {unit: second, requests_per_unit: 1, algorithm: token_bucket, refill_interval: 0, max_debt: 0}]"), true},
	{"lease on a node without a rule", desc("lease: true"), true},
	{"lease on sliding_log", desc("lease: true, rate_limit: {unit: second, requests_per_unit: 10, algorithm: Sliding_Log}"), false},
	{"lease on a stepped token_bucket", desc("lease: true, rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, refill_interval: 100ms}"), false},
	{"lease on a token_bucket with debt", desc("lease: on, rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, max_debt: 1}"), false},
	{"lease on a zero limit", desc("lease: true, rate_limit: {unit: second, requests_per_unit: 0}"), false},
	{"lease without requests_per_unit", desc("lease: true, rate_limit: {unit: second}"), false},
	{"lease on an unlimited rule", desc("lease: true, rate_limit: {unlimited: true}"), false},
	{"lease on one sliding_log of rate_limits", desc("lease: true, rate_limits: [{unit: second, requests_per_unit: 1}, {unit: day, requests_per_unit: 9, algorithm: sliding_log}]"), false},
	{"lease not a boolean", desc("lease: 1, rate_limit: {unit: second, requests_per_unit: 10}"), false},
}

func TestSchemaAgreesWithLoader(t *testing.T) {
	s := compileSchema(t)
	for _, tt := range schemaLoaderTests {
		t.Run(tt.name, func(t *testing.T) {
			schemaErr := validate(t, s, []byte(tt.doc))
			_, loadErr := config.Parse([]config.File{{Name: "case.yaml", Data: []byte(tt.doc)}})
			if (schemaErr == nil) != tt.valid {
				t.Errorf("schema: valid=%v, want %v (%v)", schemaErr == nil, tt.valid, schemaErr)
			}
			if (loadErr == nil) != tt.valid {
				t.Errorf("loader: valid=%v, want %v (%v)", loadErr == nil, tt.valid, loadErr)
			}
		})
	}
}

// TestLoaderOnlyChecks lists what the schema cannot see and only the
// loader (and so `ratelimitd check`) refuses: relations between fields and
// documents, and YAML spellings lost when YAML becomes JSON. If the schema
// learns one of them, move the case to TestSchemaAgreesWithLoader.
func TestLoaderOnlyChecks(t *testing.T) {
	s := compileSchema(t)
	tests := []struct{ name, doc, loaderSays string }{
		{"a duplicate descriptor", "domain: d\ndescriptors:\n  - key: k\n  - key: k\n", "duplicate descriptor"},
		{"two limits of one rate_limits with one name", desc("rate_limits: [{unit: second, name: x}, {unit: day, name: x}]"), "duplicate name"},
		{"a limit replacing another of its rate_limits", desc("rate_limits: [{unit: second, name: x}, {unit: day, replaces: [{name: x}]}]"), "a limit of the same descriptor"},
		{"a rule replacing itself", rl("unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]"), "cannot replace itself"},
		{"refill_interval longer than the period", rl("unit: second, requests_per_unit: 1, algorithm: token_bucket, refill_interval: 2s"), "refill_interval"},
		{"refill_interval below a microsecond", rl("unit: second, requests_per_unit: 1, algorithm: token_bucket, refill_interval: 1ns"), "refill_interval"},
		{"a bucket that takes over 50 years to fill", rl("unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 100"), "longer than"},
		{"a quoted yes", desc("shadow_mode: 'yes'"), "want true or false"},
		{"a whole number written as a float", rl("unit: second, requests_per_unit: 10.0"), "want a whole number"},
		{"a second YAML document", "domain: d\n---\ndomain: e\n", "more than one YAML document"},
		{"a value_regex that is not RE2", desc("value_regex: '(a)\\1'"), "invalid RE2 regular expression"},
		{"an unbalanced value_regex", desc("value_regex: 'a(b'"), "invalid RE2 regular expression"},
		{"the same value_regex twice under one key", "domain: d\ndescriptors:\n  - {key: k, value_regex: a.*}\n  - {key: k, value_regex: a.*}\n", "duplicate value_regex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validate(t, s, []byte(tt.doc)); err != nil {
				t.Errorf("the schema now refuses it (%v): move the case to TestSchemaAgreesWithLoader", err)
			}
			_, err := config.Parse([]config.File{{Name: "case.yaml", Data: []byte(tt.doc)}})
			if err == nil || !strings.Contains(err.Error(), tt.loaderSays) {
				t.Errorf("loader: %v, want an error containing %q", err, tt.loaderSays)
			}
		})
	}
}
