package envoystats

import (
	"regexp"
	"strings"
)

// The scopes envoyproxy/ratelimit roots its stats at: per-rule stats under
// ratelimit.service.rate_limit.<stats key>, service-wide ones under
// ratelimit.service, and the gRPC server's under ratelimit_server.<method>.
const (
	rootScope     = "ratelimit"
	serviceScope  = "service"
	ruleScope     = "rate_limit"
	errorScope    = "call.should_rate_limit"
	serverScope   = "ratelimit_server"
	overflowValue = "_overflow"
)

// unsafeInName reports whether b may not appear in a stat's name: the
// characters a statsd line uses between its name, value and type, and
// control characters, which would end the line (\n, \r) or the packet
// (\x00) and let a request value write a stat of its own.
func unsafeInName(b byte) bool { return b == ':' || b == '|' || b < 0x20 || b == 0x7f }

// replaceUnsafe is key with every unsafeInName byte as '_' (other bytes,
// invalid UTF-8 included, as they are).
func replaceUnsafe(key string) string {
	i := 0
	for i < len(key) && !unsafeInName(key[i]) {
		i++
	}
	if i == len(key) {
		return key
	}
	b := []byte(key)
	for ; i < len(b); i++ {
		if unsafeInName(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

// ipv4 finds what looks like an IPv4 address anywhere in a key (also inside
// a CIDR such as 0.0.0.0/0), as envoyproxy's sanitiser does.
var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// SanitizeKey rewrites a stats key (domain.key_value.key2) the way
// envoyproxy does before it becomes part of a stat name: ':' and '|' become
// '_', and so do the dots of every IPv4 address, so that an address stays
// one segment of the name (masked_remote_address_0_0_0_0/0) and a statsd
// mapping splits the key into domain, key1, key2 where the config nests.
// Other dots still split segments, as they do in envoyproxy. Control
// characters become '_' too (envoyproxy keeps them, and a request value
// holding a newline then ends the statsd line).
func SanitizeKey(key string) string {
	key = replaceUnsafe(key)
	if !strings.Contains(key, ".") {
		return key
	}
	return ipv4.ReplaceAllStringFunc(key, func(ip string) string {
		return strings.ReplaceAll(ip, ".", "_")
	})
}

// methodName is the last element of a gRPC full method
// (/package.Service/Method), the name envoyproxy's server stats use.
func methodName(full string) string {
	full = strings.TrimPrefix(full, "/")
	if _, m, ok := strings.Cut(full, "/"); ok {
		return m
	}
	return "unknown"
}
