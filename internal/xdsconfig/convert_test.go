package xdsconfig_test

import (
	"errors"
	"strings"
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/xdsconfig"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func mustAny(t *testing.T, c *rlsconfv3.RateLimitConfig) *anypb.Any {
	t.Helper()
	a, err := anypb.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestParseFields: every field of the proto reaches the rule, and xDS rules
// are fixed windows (the proto has no algorithm field).
func TestParseFields(t *testing.T) {
	c := &rlsconfv3.RateLimitConfig{Name: "n", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "client", Value: "vip", RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true}},
		{Key: "client", DetailedMetric: true, ShadowMode: true, RateLimit: &rlsconfv3.RateLimitPolicy{
			Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 7, Name: "per-client"}},
		{Key: "path", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "method", Value: "POST",
			RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 2,
				Replaces: []*rlsconfv3.RateLimitReplace{{Name: "per-client"}}}}}},
	}}
	cfg, err := xdsconfig.Parse([]*anypb.Any{mustAny(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		entries []config.Entry
		check   func(r *config.Rule) bool
	}{
		{[]config.Entry{{Key: "client", Value: "vip"}}, func(r *config.Rule) bool { return r.Unlimited }},
		{[]config.Entry{{Key: "client", Value: "x"}}, func(r *config.Rule) bool {
			return r.RequestsPerUnit == 7 && r.Name == "per-client" && r.ShadowMode && r.DetailedMetric &&
				r.Limit.Algorithm == algorithms.FixedWindow
		}},
		{[]config.Entry{{Key: "path", Value: "/a"}, {Key: "method", Value: "POST"}}, func(r *config.Rule) bool {
			return r.RequestsPerUnit == 2 && len(r.Replaces) == 1 && r.Replaces[0] == "per-client"
		}},
	}
	for _, tc := range cases {
		r := cfg.Match("d", tc.entries)
		if r == nil || !tc.check(r) {
			t.Errorf("%v: rule %+v", tc.entries, r)
		}
	}
}

func TestParseErrors(t *testing.T) {
	wrongType, err := anypb.New(&structpb.Struct{})
	if err != nil {
		t.Fatal(err)
	}
	noUnit := &rlsconfv3.RateLimitConfig{Name: "a", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k",
		RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 1}}}}
	unitAndUnlimited := &rlsconfv3.RateLimitConfig{Name: "b", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k",
		RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true, Unit: rlsconfv3.RateLimitUnit_SECOND}}}}
	noDomain := &rlsconfv3.RateLimitConfig{Name: "c"}
	cases := []struct {
		name string
		res  []*anypb.Any
		want []string
	}{
		{"wrong type", []*anypb.Any{wrongType}, []string{"resource #0", "google.protobuf.Struct"}},
		{"unknown unit", []*anypb.Any{mustAny(t, noUnit)}, []string{"xds resource a", "descriptors[0].rate_limit.unit"}},
		{"unit with unlimited", []*anypb.Any{mustAny(t, unitAndUnlimited)}, []string{"xds resource b", "unit", "unlimited"}},
		{"no domain", []*anypb.Any{mustAny(t, noDomain)}, []string{"xds resource c", "domain"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := xdsconfig.Parse(tc.res)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// Lines of the rendered YAML mean nothing to the control plane.
			var ce *config.Error
			if errors.As(err, &ce) && ce.Line != 0 {
				t.Errorf("error keeps line %d of the rendered YAML", ce.Line)
			}
		})
	}
}

// TestParseQuotaMode: quota_mode (field 7, newer than the proto this module
// builds with) arrives as an unknown field, as Envoy AI Gateway sends it on
// every descriptor, and still marks the rule; other unknown fields beside it
// are skipped.
func TestParseQuotaMode(t *testing.T) {
	quota := func(d *rlsconfv3.RateLimitDescriptor, unknown ...byte) *rlsconfv3.RateLimitDescriptor {
		d.ProtoReflect().SetUnknown(unknown)
		return d
	}
	perMinute := &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 5}
	tests := []struct {
		name    string
		unknown []byte
		want    bool
	}{
		{"absent", nil, false},
		{"true", protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1), true},
		{"false", protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 0), false},
		{"after another unknown field", protowire.AppendVarint(protowire.AppendTag(
			protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "x"), 7, protowire.VarintType), 1), true},
		{"the last occurrence wins", protowire.AppendVarint(protowire.AppendTag(
			protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1), 7, protowire.VarintType), 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &rlsconfv3.RateLimitConfig{Name: "n", Domain: "ai-gateway-quota", Descriptors: []*rlsconfv3.RateLimitDescriptor{
				{Key: "backend_name", Value: "default/openai", Descriptors: []*rlsconfv3.RateLimitDescriptor{
					quota(&rlsconfv3.RateLimitDescriptor{Key: "model_name_override", Value: "gpt-4o", RateLimit: perMinute}, tt.unknown...)}},
			}}
			// Round-trip through the wire, as a control plane's resource
			// arrives.
			cfg, err := xdsconfig.Parse([]*anypb.Any{mustAny(t, c)})
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Match("ai-gateway-quota", []config.Entry{{Key: "backend_name", Value: "default/openai"}, {Key: "model_name_override", Value: "gpt-4o"}})
			if r == nil || r.QuotaMode != tt.want {
				t.Errorf("rule %+v, want quota_mode %v", r, tt.want)
			}
		})
	}
}
