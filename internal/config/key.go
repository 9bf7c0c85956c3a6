package config

import (
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// KeyBuilder names the store key of a matched rule's counter:
//
//	Prefix{domain:len:key:len:value[:len:key:len:value...]}:algorithm:period[:index]
//
// Lengths and percent-escapes keep keys injective whatever a request sends;
// the tag (between the braces) spreads a domain over a Cluster; algorithm
// and period start fresh state when a rule changes (docs/redis.md, "Keys").
type KeyBuilder struct {
	Prefix string
}

// keyParts are the constant parts of a rule's keys, computed once at config
// load so the hot path only copies them.
type keyParts struct {
	domain string // escaped domain
	suffix string // "}:algorithm:period"
}

func newKeyParts(r *Rule) keyParts {
	var sb strings.Builder
	writeEscaped(&sb, r.Domain, true)
	domain := sb.String()
	sb.Reset()
	sb.WriteString("}:")
	sb.WriteString(r.Limit.Algorithm.Info().KeyName)
	sb.WriteByte(':')
	if r.Limit.Calendar {
		// Calendar months are their own windows: a state of 30-day
		// windows must not be read as one (USE_CALENDAR_MONTH_RATE_LIMIT
		// turned on or off starts fresh counters).
		sb.WriteString(strconv.FormatInt(int64(r.Limit.Period/algorithms.Month), 10))
		sb.WriteString("mo")
	} else {
		writePeriod(&sb, r.Limit.Period)
	}
	if r.Index > 0 {
		sb.WriteByte(':')
		sb.WriteString(strconv.Itoa(r.Index))
	}
	return keyParts{domain: domain, suffix: sb.String()}
}

// Key returns the key of rule's counter for the request entries it matched.
func (b KeyBuilder) Key(rule *Rule, entries []Entry) string {
	parts := rule.key
	if parts.suffix == "" {
		// A Rule not built by Parse or OverrideRule (tests).
		parts = newKeyParts(rule)
	}
	size := escapedLen(b.Prefix, false) + 1 + len(parts.domain) + len(parts.suffix)
	for _, e := range entries {
		size += escapedLen(e.Key, false) + escapedLen(e.Value, false) + 2*20 + 5
	}
	var sb strings.Builder
	sb.Grow(size)
	writeEscaped(&sb, b.Prefix, false)
	sb.WriteByte('{')
	sb.WriteString(parts.domain)
	var num [20]byte
	for i, e := range entries {
		sb.WriteByte(':')
		writeField(&sb, num[:0], e.Key)
		sb.WriteByte(':')
		if i < len(rule.path) && rule.path[i].shared {
			sb.WriteByte(rule.path[i].sharedMarker())
			writeField(&sb, num[:0], rule.path[i].value)
			continue
		}
		writeField(&sb, num[:0], e.Value)
	}
	sb.WriteString(parts.suffix)
	return sb.String()
}

func writeField(sb *strings.Builder, num []byte, s string) {
	sb.Write(strconv.AppendInt(num, int64(len(s)), 10))
	sb.WriteByte(':')
	writeEscaped(sb, s, false)
}

// writePeriod writes whole seconds as "60s" and any other period in
// microseconds ("1500us"), so each period has exactly one spelling.
func writePeriod(sb *strings.Builder, p time.Duration) {
	var num [20]byte
	if p%time.Second == 0 {
		sb.Write(strconv.AppendInt(num[:0], int64(p/time.Second), 10))
		sb.WriteByte('s')
		return
	}
	sb.Write(strconv.AppendInt(num[:0], p.Microseconds(), 10))
	sb.WriteString("us")
}

func escapedLen(s string, colon bool) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i], colon) {
			n += 2
		}
	}
	return n
}

// needsEscape: braces would move the Cluster hash tag, '%' is the escape
// itself, and the domain (not length-prefixed) must not contain the ':'
// that ends it.
func needsEscape(c byte, colon bool) bool {
	return c == '{' || c == '}' || c == '%' || (colon && c == ':')
}

func writeEscaped(sb *strings.Builder, s string, colon bool) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape(c, colon) {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte('%')
		sb.WriteByte(hex[c>>4])
		sb.WriteByte(hex[c&0xf])
	}
}

// sharedMarker starts the pattern of a shared level in a key.
func (l level) sharedMarker() byte {
	if l.kind == byRegex {
		return '~'
	}
	return '*'
}
