package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

var parseBadTests = []struct {
	name string
	yaml string
	want []string // each must appear in the error text
}{
	{"invalid YAML names its line", "domain: d\ndescriptors:\n  - key: a\n    value: b: c\n",
		[]string{"f.yaml:4: invalid YAML: mapping values are not allowed"}},
	{"tab indentation", "domain: d\n\tdescriptors: []\n", []string{"f.yaml:2: invalid YAML"}},
	{"empty file", "", []string{"f.yaml:1: domain: missing"}},
	{"comment-only file", "# nothing\n", []string{"f.yaml:1: domain: missing"}},
	{"missing domain", "descriptors: []\n", []string{"f.yaml:1: domain: missing or empty"}},
	{"empty domain", "\ndomain: \"\"\n", []string{"f.yaml:2: domain: missing or empty"}},
	{"top level not a mapping", "- domain: d\n", []string{"f.yaml:1: want a mapping, got a list"}},
	{"unknown top-level key", "domain: d\ndomian: e\n", []string{`f.yaml:2: domian: unknown key "domian"`}},
	{"unknown descriptor key", "domain: d\ndescriptors:\n  - key: a\n    rate_limt: {}\n",
		[]string{`f.yaml:4: descriptors[0].rate_limt: unknown key "rate_limt"`}},
	{"unknown rate_limit key", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_second: 5\n",
		[]string{`f.yaml:6: descriptors[0].rate_limit.requests_per_second: unknown key`}},
	{"key in the wrong place", "domain: d\nunit: second\n", []string{`f.yaml:2: unit: unknown key "unit"`}},
	{"unknown replaces key", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces: [{nmae: x}]\n",
		[]string{`f.yaml:6: descriptors[0].rate_limit.replaces[0].nmae: unknown key`}},
	{"repeated key", "domain: d\ndescriptors:\n  - key: a\n    key: b\n",
		[]string{"f.yaml:4: descriptors[0].key: repeated key (first at line 3)"}},
	{"more than one document", "domain: d\n---\ndomain: e\n", []string{"more than one YAML document"}},
	{"missing key", "domain: d\ndescriptors:\n  - value: v\n", []string{"f.yaml:3: descriptors[0].key: missing or empty"}},
	{"nested missing key", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: \"\"\n",
		[]string{"f.yaml:5: descriptors[0].descriptors[0].key: missing or empty"}},
	{"duplicate composite key", "domain: d\ndescriptors:\n  - key: a\n    value: b\n  - key: a\n    value: b\n",
		[]string{`f.yaml:5: descriptors[1]: duplicate descriptor composite key "d.a_b" (first at f.yaml:3)`}},
	{"duplicate key-only", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: x\n      - key: x\n",
		[]string{`f.yaml:6: descriptors[0].descriptors[1]: duplicate descriptor composite key "d.a.x"`}},
	{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minutes\n",
		[]string{`f.yaml:5: descriptors[0].rate_limit.unit: unknown unit "minutes"`}},
	{"unknown enum value is not a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: unknown}\n",
		[]string{`descriptors[0].rate_limit.unit: unknown unit "unknown"`}},
	{"missing unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 5\n",
		[]string{"f.yaml:4: descriptors[0].rate_limit.unit: missing"}},
	{"unlimited with a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n",
		[]string{"f.yaml:6: descriptors[0].rate_limit.unit: must not be set when unlimited is true"}},
	{"unlimited with an algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, algorithm: gcra}\n",
		[]string{"f.yaml:4: descriptors[0].rate_limit.algorithm: must not be set when unlimited is true"}},
	{"replaces with empty name", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces:\n        - name: \"\"\n",
		[]string{"f.yaml:7: descriptors[0].rate_limit.replaces[0].name: missing or empty"}},
	{"replaces without name", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces:\n        - {}\n",
		[]string{"f.yaml:7: descriptors[0].rate_limit.replaces[0].name: missing or empty"}},
	{"replaces itself", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      replaces: [{name: me}]\n      name: me\n      unit: second\n",
		[]string{`f.yaml:5: descriptors[0].rate_limit.replaces[0].name: a rule cannot replace itself ("me")`}},
	{"requests_per_unit as text", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: ten}\n",
		[]string{`f.yaml:4: descriptors[0].rate_limit.requests_per_unit: want a whole number`, `string "ten"`}},
	{"requests_per_unit quoted", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: \"10\"}\n",
		[]string{`descriptors[0].rate_limit.requests_per_unit: want a whole number`}},
	{"requests_per_unit negative", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
		[]string{`descriptors[0].rate_limit.requests_per_unit: want a whole number from 0 to 4294967295, got int -1`}},
	{"requests_per_unit over uint32", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n",
		[]string{`descriptors[0].rate_limit.requests_per_unit: 4294967296 is larger than 4294967295`}},
	{"requests_per_unit float", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1.5}\n",
		[]string{`descriptors[0].rate_limit.requests_per_unit: want a whole number`, "float 1.5"}},
	{"key as a list", "domain: d\ndescriptors:\n  - key: [a]\n", []string{"f.yaml:3: descriptors[0].key: want a string, got a list"}},
	{"descriptors as a mapping", "domain: d\ndescriptors: {key: a}\n", []string{"f.yaml:2: descriptors: want a list, got a mapping"}},
	{"descriptor as a string", "domain: d\ndescriptors:\n  - a\n", []string{`f.yaml:3: descriptors[0]: want a mapping, got string "a"`}},
	{"rate_limit as a number", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: 5\n", []string{"f.yaml:4: descriptors[0].rate_limit: want a mapping, got int 5"}},
	{"bad boolean", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n",
		[]string{`f.yaml:4: descriptors[0].shadow_mode: want true or false, got string "maybe"`}},
	{"quoted boolean", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: \"yes\"\n",
		[]string{`descriptors[0].shadow_mode: want true or false`}},
	{"metadata as a list", "domain: d\ndescriptors:\n  - key: a\n    metadata: [a]\n", []string{"f.yaml:4: descriptors[0].metadata: want a mapping, got a list"}},
	{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n",
		[]string{`f.yaml:5: descriptors[0].share_threshold: only applies to a wildcard value`}},
	{"unknown algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, algorithm: leaky}\n",
		[]string{`f.yaml:4: descriptors[0].rate_limit.algorithm: unknown algorithm "leaky"`}},
	{"burst zero", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, algorithm: gcra, burst: 0}\n",
		[]string{`descriptors[0].rate_limit.burst: must be at least 1`}},
	{"burst on a window", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      burst: 5\n",
		[]string{`f.yaml:6: descriptors[0].rate_limit.burst: applies to token_bucket, leaky_bucket and gcra only, not fixed_window`}},
	{"refill_interval not a duration", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      algorithm: token_bucket\n      refill_interval: fast\n",
		[]string{`f.yaml:7: descriptors[0].rate_limit.refill_interval: want a duration`}},
	{"refill_interval on a window", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      refill_interval: 10ms\n",
		[]string{`f.yaml:4: descriptors[0].rate_limit: refill_interval and max_debt apply to token_bucket only`}},
	{"refill_interval longer than the period", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, algorithm: token_bucket, refill_interval: 2s}\n",
		[]string{`f.yaml:4: descriptors[0].rate_limit: refill_interval 2s must be whole microseconds between 0 and the period 1s`}},
	{"unit_multiplier zero", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, unit_multiplier: 0}\n",
		[]string{`descriptors[0].rate_limit.unit_multiplier: must be at least 1`}},
	{"unit_multiplier beyond the maximum period", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: year, unit_multiplier: 101}\n",
		[]string{`descriptors[0].rate_limit.unit_multiplier: 101 year is longer than`}},
	{"recursive merge alias", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &x {unit: second, <<: *x}\n",
		[]string{"f.yaml:4: descriptors[0].rate_limit: nesting too deep"}},
	{"recursive descriptors alias", "domain: d\ndescriptors: &d\n  - key: a\n    descriptors: *d\n",
		[]string{"nesting too deep"}},
	{"recursive metadata alias", "domain: d\ndescriptors:\n  - key: a\n    metadata: &m {a: *m}\n",
		[]string{"descriptors[0].metadata.a", "nesting too deep"}},
	{"alias bomb", aliasBomb(), []string{"too many nodes"}},
	{"burst beyond MaxCount", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, algorithm: gcra, burst: 1099511627777}\n",
		[]string{`descriptors[0].rate_limit.burst: 1099511627777 is larger than 1099511627776`}},
}

func TestParseBad(t *testing.T) {
	for _, tt := range parseBadTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]File{{Name: "f.yaml", Data: []byte(tt.yaml)}})
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "f.yaml" {
				t.Errorf("error %v is not a located *Error", err)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	files := []File{
		{Name: "a.yaml", Data: []byte("domain: a\ndescriptors:\n  - key: x\n    rate_limit: {unit: minutes}\n  - key: y\n    bogus: 1\n")},
		{Name: "b.yaml", Data: []byte("domain: [b\n")},
		{Name: "good.yaml", Data: []byte("domain: g\n")},
		{Name: "c.yaml", Data: []byte("domain: a\n")},
	}
	_, err := Parse(files)
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	for _, w := range []string{
		`a.yaml:4: descriptors[0].rate_limit.unit: unknown unit "minutes"`,
		`a.yaml:6: descriptors[1].bogus: unknown key`,
		`b.yaml:1: invalid YAML`,
		`c.yaml:1: domain: duplicate domain "a" (also in a.yaml)`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "good.yaml") {
		t.Errorf("good file reported: %v", err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("got %d errors, want 4:\n%v", n, err)
	}
}

// aliasBomb nests descriptor lists of aliases so that walking it would
// visit 10^9 descriptors.
func aliasBomb() string {
	var sb strings.Builder
	sb.WriteString("domain: d\ndescriptors:\n  - key: l0\n    descriptors: &l0 [{key: a}]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&sb, "  - key: l%d\n    descriptors: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "{key: k%d, descriptors: *l%d}", j, i-1)
		}
		sb.WriteString("]\n")
	}
	return sb.String()
}

// FuzzParse checks that no input makes Parse panic and that every error is
// located in the file.
func FuzzParse(f *testing.F) {
	f.Add([]byte(matchConfig))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: &x {unit: second, <<: *x}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    metadata: {a: [1, {b: ~}], c: 2001-01-01}\n    rate_limit: {unit: year, unit_multiplier: 100, algorithm: gcra, burst: 3}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse([]File{{Name: "f.yaml", Data: data}})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error not located in the file: %v", err)
			}
			return
		}
		_ = c.Dump()
	})
}

func TestParseCapsErrorsPerFile(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("domain: d\ndescriptors:\n")
	for i := range 200 {
		fmt.Fprintf(&sb, "  - key: k%d\n    bogus: 1\n", i)
	}
	_, err := Parse([]File{{Name: "big.yaml", Data: []byte(sb.String())}, {Name: "other.yaml", Data: []byte("nope: 1\n")}})
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	if n := strings.Count(err.Error(), "big.yaml:"); n != maxErrorsPerFile {
		t.Errorf("big.yaml reported %d lines, want %d (the last one the cap notice)", n, maxErrorsPerFile)
	}
	if !strings.Contains(err.Error(), "big.yaml: too many errors") || !strings.Contains(err.Error(), "other.yaml:1: nope: unknown key") {
		t.Errorf("missing the cap notice or the other file's error; last lines: %q", lines[len(lines)-3:])
	}
}
