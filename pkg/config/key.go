package config

import (
	"strconv"
	"strings"
	"time"
)

// KeyBuilder names the store key of a matched rule's counter.
//
// Layout, readable in redis-cli:
//
//	Prefix{domain}:algorithm:period:len:key:len:value[:len:key:len:value...]
//
// e.g. rl:{example}:fixed_window:60s:7:user_id:5:alice. The Redis Cluster
// hash tag is the domain alone, so every key of one request lands in one slot
// and one EVALSHA can decide them all. '{', '}' and '%' in Prefix and domain
// are percent-escaped so that nothing can move the tag. Every key and value
// is length-prefixed, so distinct descriptors never share a counter (unlike
// envoyproxy's key_value joins); a wildcard's pattern shared through
// share_threshold is written as *len:pattern so it never equals a literal
// value. The algorithm and period are part of the key so that changing
// either starts from fresh state instead of misreading the old one.
type KeyBuilder struct {
	Prefix string
}

// Key returns the key of rule's counter for the request entries it matched.
func (b KeyBuilder) Key(rule *Rule, entries []Entry) string {
	size := escapedLen(b.Prefix) + escapedLen(rule.Domain) + 48
	for _, e := range entries {
		size += len(e.Key) + len(e.Value) + 2*20 + 4
	}
	var sb strings.Builder
	sb.Grow(size)
	writeEscaped(&sb, b.Prefix)
	sb.WriteByte('{')
	writeEscaped(&sb, rule.Domain)
	sb.WriteString("}:")
	sb.WriteString(rule.Limit.Algorithm.String())
	sb.WriteByte(':')
	writePeriod(&sb, rule.Limit.Period)
	var num [20]byte
	for i, e := range entries {
		sb.WriteByte(':')
		writeField(&sb, num[:0], e.Key)
		sb.WriteByte(':')
		if i < len(rule.path) && rule.path[i].shared {
			sb.WriteByte('*')
			writeField(&sb, num[:0], rule.path[i].value)
			continue
		}
		writeField(&sb, num[:0], e.Value)
	}
	return sb.String()
}

func writeField(sb *strings.Builder, num []byte, s string) {
	sb.Write(strconv.AppendInt(num, int64(len(s)), 10))
	sb.WriteByte(':')
	sb.WriteString(s)
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

func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n += 2
		}
	}
	return n
}

func needsEscape(c byte) bool {
	return c == '{' || c == '}' || c == '%'
}

func writeEscaped(sb *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape(c) {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte('%')
		sb.WriteByte(hex[c>>4])
		sb.WriteByte(hex[c&0xf])
	}
}
