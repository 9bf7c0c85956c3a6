package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

const countersYAML = `
domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: vip
    rate_limit: {unlimited: true}
  - key: api
    rate_limit: {unit: hour, requests_per_unit: 100, name: api_base}
  - key: api_gold
    rate_limit: {unit: hour, requests_per_unit: 1000, replaces: [{name: api_base}], algorithm: token_bucket, burst: 50}
`

func entries(kv ...string) []config.Entry {
	var out []config.Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, config.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// Inspect reports what ShouldRateLimit would decide, statuses and all, and
// charges nothing however often it is called.
func TestInspectReadsWithoutCharging(t *testing.T) {
	f := newFixture(t, countersYAML)
	for range 3 {
		f.call(t, request("d", desc("user", "alice")))
	}
	f.clock.Advance(15 * time.Second)
	descs := [][]config.Entry{entries("user", "alice"), entries("vip", "x"), entries("api", "k"), entries("api_gold", "k"), entries("nope", "x")}
	for round := range 3 {
		got, err := f.svc.Inspect(context.Background(), "d", descs)
		if err != nil {
			t.Fatal(err)
		}
		want := []ratelimit.CounterStatus{ratelimit.Counted, ratelimit.Unlimited, ratelimit.Replaced, ratelimit.Counted, ratelimit.NoRule}
		for i, c := range got {
			if c.Status != want[i] {
				t.Errorf("round %d descriptor %d: status %d, want %d", round, i, c.Status, want[i])
			}
		}
		if d := got[0].Decision; !d.Allowed || d.Remaining != 2 || d.ResetAfter != 45*time.Second {
			t.Errorf("round %d: alice's counter %+v, want 2 left resetting in 45s", round, d)
		}
		if got[0].Key != "{d:4:user:5:alice}:fixed_window.int:60s" || got[0].Rule.StatKey != "d.user" {
			t.Errorf("round %d: key %q rule %q", round, got[0].Key, got[0].Rule.StatKey)
		}
		if d := got[3].Decision; !d.Allowed || d.Remaining != 50 {
			t.Errorf("round %d: untouched bucket %+v, want 50 left", round, d)
		}
		if got[4].Rule != nil || got[4].Key != "" {
			t.Errorf("round %d: unmatched descriptor %+v", round, got[4])
		}
	}
	// Nothing was charged: alice still has exactly 2.
	for range 2 {
		if resp := f.call(t, request("d", desc("user", "alice"))); resp.GetOverallCode() != OK {
			t.Fatalf("alice denied before her limit: %v", resp)
		}
	}
	if resp := f.call(t, request("d", desc("user", "alice"))); resp.GetOverallCode() != OVER {
		t.Fatalf("alice's 6th call: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	got, err := f.svc.Inspect(context.Background(), "d", descs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if d := got[0].Decision; !d.Allowed || d.Remaining != 0 {
		t.Errorf("at the limit: %+v, want allowed (a check passes at the limit) with 0 left", d)
	}
}

func TestCountersErrors(t *testing.T) {
	f := newFixture(t, countersYAML)
	for name, tc := range map[string]struct {
		domain string
		descs  [][]config.Entry
		code   codes.Code
	}{
		"no domain":      {"", [][]config.Entry{entries("user", "a")}, codes.InvalidArgument},
		"no descriptors": {"d", nil, codes.InvalidArgument},
		"empty key":      {"d", [][]config.Entry{entries("", "a")}, codes.InvalidArgument},
	} {
		if _, err := f.svc.Counters(tc.domain, tc.descs); status.Code(err) != tc.code {
			t.Errorf("%s: Counters error %v, want %s", name, err, tc.code)
		}
		if _, err := f.svc.Inspect(context.Background(), tc.domain, tc.descs); status.Code(err) != tc.code {
			t.Errorf("%s: Inspect error %v, want %s", name, err, tc.code)
		}
	}
	none := ratelimit.New(staticConfig{nil}, f.store)
	if _, err := none.Counters("d", [][]config.Entry{entries("user", "a")}); status.Code(err) != codes.Unavailable {
		t.Errorf("without a config: %v, want Unavailable", err)
	}
}
