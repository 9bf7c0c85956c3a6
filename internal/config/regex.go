package config

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxValueRegexLen caps a value_regex, in characters (as the JSON Schema's
// maxLength counts): RE2 matches in time linear in the value, but the
// compiled program and the per-match setup grow with the pattern, and a
// pattern longer than this is a generated list that belongs in several
// descriptors or exact values.
const MaxValueRegexLen = 1024

// valueRegex is a compiled value_regex. It must match the whole request
// value, as Envoy's own safe_regex matchers do: a pattern that matched
// anywhere in the value would make "admin" limit "badminton".
type valueRegex struct {
	pattern string // as written, for errors, stats keys and Dump
	re      *regexp.Regexp
	// prefix is a literal every matching value starts with: checking it
	// first costs a few nanoseconds where MatchString costs tens, which is
	// what a request pays for each sibling regex that does not match.
	prefix string
}

// compileValueRegex checks and compiles a value_regex. The pattern alone is
// compiled first so that an unbalanced one (`a)|(b`) is refused instead of
// being completed by the anchors wrapped around it.
func compileValueRegex(pattern string) (*valueRegex, error) {
	if n := utf8.RuneCountInString(pattern); n > MaxValueRegexLen {
		return nil, fmt.Errorf("%d characters, longer than the %d allowed", n, MaxValueRegexLen)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, fmt.Errorf("invalid RE2 regular expression: %w", err)
	}
	// \A and \z, not ^ and $: a (?m) flag inside the pattern must not turn
	// the anchors into line boundaries.
	re, err := regexp.Compile(`\A(?:` + pattern + `)\z`)
	if err != nil {
		return nil, fmt.Errorf("invalid RE2 regular expression: %w", err)
	}
	prefix, _ := re.LiteralPrefix()
	return &valueRegex{pattern: pattern, re: re, prefix: prefix}, nil
}

// match reports whether the whole of s matches. Go's regexp reuses its
// matching machines from a pool, so a match does not allocate.
func (v *valueRegex) match(s string) bool {
	return strings.HasPrefix(s, v.prefix) && v.re.MatchString(s)
}
