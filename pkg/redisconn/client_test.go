package redisconn

import (
	"slices"
	"testing"
)

func TestSplitSentinel(t *testing.T) {
	cases := []struct {
		in        string
		master    string
		sentinels []string
		ok        bool
	}{
		{in: "mymaster,h1:26379", master: "mymaster", sentinels: []string{"h1:26379"}, ok: true},
		{in: "m,h1:1,h2:2,[::1]:3", master: "m", sentinels: []string{"h1:1", "h2:2", "[::1]:3"}, ok: true},
		{in: "mymaster", ok: false},
		{in: ",h1:26379", ok: false},
		{in: "m,", ok: false},
		{in: "m,h1", ok: false},
		{in: "m,h1:1,,h2:2", ok: false},
	}
	for _, tc := range cases {
		master, sentinels, err := splitSentinel(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("splitSentinel(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && (master != tc.master || !slices.Equal(sentinels, tc.sentinels)) {
			t.Errorf("splitSentinel(%q) = %q %v, want %q %v", tc.in, master, sentinels, tc.master, tc.sentinels)
		}
	}
}
