package config

import (
	"strings"
	"testing"
)

func TestSyntaxErrorLines(t *testing.T) {
	const head = "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n"
	tests := []struct {
		name string
		data string
		want string // file:line: prefix and a part of the message
	}{
		{"bad indent on line 6", head + "     requests_per_unit: 1\n", "t.yaml:6: invalid YAML: did not find expected key"},
		{"list item inside a mapping", head + "      - x\n", "t.yaml:6: invalid YAML: did not find expected key"},
		{"tab on line 6", head + "\tx: 1\n", "t.yaml:6: invalid YAML: found a tab character"},
		{"unclosed flow list", head + "      requests_per_unit: [1\n", "t.yaml:6: invalid YAML: did not find expected ',' or ']'"},
		{"missing colon", head + "  bad\n", "t.yaml:6: invalid YAML: could not find expected ':'"},
		{"unclosed quote", "domain: d\ndescriptors:\n  - key: a\n    value: \"x\n    rate_limit:\n      unit: second\n", "t.yaml:4: invalid YAML: found unexpected end of stream"},
		{"bad indent deep in a long file", head + strings.Repeat("  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n", 500) + "  - key: c\n   value: x\n",
			"t.yaml:1007: invalid YAML:"},
		{"second document broken", "domain: d\n---\na: [\n", "t.yaml:3: invalid YAML:"},
		{"not UTF-8 on line 5", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: se\xffcond\n", "t.yaml:5: invalid YAML: not UTF-8 (byte at column 15)"},
		{"latin-1 value", "domain: caf\xe9\n", "t.yaml:1: invalid YAML: not UTF-8 (byte at column 12)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]File{{Name: "t.yaml", Data: []byte(tt.data)}})
			if err == nil {
				t.Fatal("Parse succeeded, want a syntax error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want %q", err, tt.want)
			}
		})
	}
}

// FuzzLoad: the loader never panics and never hangs on any bytes, and
// every error it reports names the file and, when it has one, a line
// inside the file. Its seed corpus runs in every go test.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n     requests_per_unit: 1\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - &a {key: x, descriptors: [*a]}\n"))
	f.Add([]byte("a: &a [*a, *a]\nb: &b [*a, *a]\nc: [*b, *b]\n"))
	f.Add([]byte("domain: caf\xe9\n"))
	f.Add([]byte("\xff\xfed\x00o\x00"))
	f.Add([]byte("domain: d\n---\ndomain: e\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    value: \"x\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: gcra, burst: 9}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		_, err := Parse([]File{{Name: "f.yaml", Data: data}})
		if err == nil {
			return
		}
		// An upper bound of YAML's line count: it breaks lines at \r too,
		// and at NEL, LS and PS.
		lines := 1
		for _, sep := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
			lines += strings.Count(string(data), sep)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "f.yaml") {
				t.Fatalf("error line %q does not name the file", line)
			}
		}
		var list interface{ Unwrap() []error }
		if e, ok := err.(interface{ Unwrap() []error }); ok {
			list = e
		}
		if list == nil {
			return
		}
		for _, e := range list.Unwrap() {
			if ce, ok := e.(*Error); ok && ce.Line > lines {
				t.Fatalf("%v: line %d is past the end of a %d-line file", ce, ce.Line, lines)
			}
		}
	})
}
