package envoystats

import "testing"

func TestSanitizeKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"domain.foo|bar", "domain.foo_bar"},
		{"domain.foo:bar", "domain.foo_bar"},
		{"domain.masked_remote_address_0.0.0.0/0", "domain.masked_remote_address_0_0_0_0/0"},
		{"domain.remote_address_172.18.0.1", "domain.remote_address_172_18_0_1"},
		{"domain.masked_remote_address_0.0.0.0/0_remote_address_172.18.0.1", "domain.masked_remote_address_0_0_0_0/0_remote_address_172_18_0_1"},
		{"d.ip_1234.5.6.7", "d.ip_1234_5_6_7"}, // RE2's leftmost match starts at the 2
		{"d.version_1.2.3", "d.version_1.2.3"}, // three numbers are no address: the dots still split
		{"d.k_v.k2", "d.k_v.k2"},
		{"d.ipv6_::1", "d.ipv6___1"},
		{"d.user_a\nevil.total_hits:9|c\r\x00b\x7f\t", "d.user_a_evil.total_hits_9_c__b__"},
		{"d.caf\xc3\xa9_\xff", "d.caf\xc3\xa9_\xff"}, // UTF-8 or not, other bytes stay
		{"plain", "plain"},
	} {
		if got := SanitizeKey(tc.in); got != tc.want {
			t.Errorf("SanitizeKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMethodName(t *testing.T) {
	for in, want := range map[string]string{
		"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit": "ShouldRateLimit",
		"/grpc.health.v1.Health/Check":                                 "Check",
		"nonsense":                                                     "unknown",
	} {
		if got := methodName(in); got != want {
			t.Errorf("methodName(%q) = %q, want %q", in, got, want)
		}
	}
}
