package ratelimit_test

import (
	"context"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

func TestInvalidRequests(t *testing.T) {
	many := func(n int, kv ...string) []*ratelimitv3.RateLimitDescriptor {
		out := make([]*ratelimitv3.RateLimitDescriptor, n)
		for i := range out {
			out[i] = desc(kv...)
		}
		return out
	}
	manyEntries := func(n int) *ratelimitv3.RateLimitDescriptor {
		d := &ratelimitv3.RateLimitDescriptor{}
		for range n {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
		}
		return d
	}
	tests := []struct {
		name    string
		req     *rlsv3.RateLimitRequest
		wantMsg string
	}{
		{"empty domain", request("", desc("one", "")), "domain must not be empty"},
		{"no descriptors", request("test"), "descriptor list must not be empty"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "test", Descriptors: many(5, "one", "")}, "5 descriptors, more than the maximum of 4"},
		{"too many entries", request("test", desc("one", ""), manyEntries(4)), "descriptor 1 has 4 entries, more than the maximum of 3"},
		{"empty key", request("test", desc("one", "", "", "v")), "descriptor 0 entry 1 has an empty key"},
		{"long key", request("test", desc(strings.Repeat("k", 9), "")), "key is 9 bytes long, more than the maximum of 8"},
		{"long value", request("test", desc("one", strings.Repeat("v", 9))), "value is 9 bytes long, more than the maximum of 8"},
		{"long domain", request(strings.Repeat("d", 9), desc("one", "")), "domain is 9 bytes long"},
		{"hits beyond the exact range", request("test", &ratelimitv3.RateLimitDescriptor{
			Entries: desc("one", "").Entries, HitsAddend: wrapperspb.UInt64(1 << 41)}), "hits_addend 2199023255552 is more than the maximum"},
		{"override window too long", request("test", withMultiplierOverride(desc("one", ""), 5, typev3.RateLimitUnit_YEAR, 1000)), "unit_multiplier 1000"},
		{"override with unknown unit", request("test", withOverride(desc("one", ""), 5, typev3.RateLimitUnit_UNKNOWN)), "unknown unit"},
	}
	f := newFixture(t, testConfig, ratelimit.WithLimits(4, 3, 8))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := f.svc.ShouldRateLimit(context.Background(), tt.req)
			if resp != nil {
				t.Errorf("response = %v, want nil", resp)
			}
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tt.wantMsg) {
				t.Errorf("error = %v %q, want InvalidArgument containing %q", st.Code(), st.Message(), tt.wantMsg)
			}
		})
	}
	// The limits are inclusive: exactly at each cap is valid.
	ok := &rlsv3.RateLimitRequest{Domain: "test", Descriptors: append(many(3, "one", "12345678"), manyEntries(3))}
	if _, err := f.svc.ShouldRateLimit(context.Background(), ok); err != nil {
		t.Errorf("request at the caps: %v", err)
	}
}

func TestDefaultLimits(t *testing.T) {
	f := newFixture(t, testConfig)
	tooMany := &rlsv3.RateLimitRequest{Domain: "test"}
	for range ratelimit.DefaultMaxDescriptors + 1 {
		tooMany.Descriptors = append(tooMany.Descriptors, desc("unlimited", ""))
	}
	if _, err := f.svc.ShouldRateLimit(context.Background(), tooMany); status.Code(err) != codes.InvalidArgument {
		t.Errorf("%d descriptors: error %v, want InvalidArgument", len(tooMany.Descriptors), err)
	}
	tooMany.Descriptors = tooMany.Descriptors[:ratelimit.DefaultMaxDescriptors]
	if _, err := f.svc.ShouldRateLimit(context.Background(), tooMany); err != nil {
		t.Errorf("%d descriptors: %v", len(tooMany.Descriptors), err)
	}
	long := request("test", desc("one", strings.Repeat("v", ratelimit.DefaultMaxValueLen+1)))
	if _, err := f.svc.ShouldRateLimit(context.Background(), long); status.Code(err) != codes.InvalidArgument {
		t.Errorf("value of %d bytes: error %v, want InvalidArgument", ratelimit.DefaultMaxValueLen+1, err)
	}
}
