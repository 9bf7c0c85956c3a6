package xdsconfig

import (
	"errors"
	"fmt"
	"strings"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// TypeURL is the resource type ratelimitd subscribes to, as envoyproxy's
// xDS provider and Envoy Gateway's xDS server name it.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// The YAML documents below mirror envoyproxy's file format field for field.
// Rendering to YAML and loading with config.Parse, as envoyproxy does, means
// an xDS resource is checked by exactly the rules a file is.
type yamlConfig struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors,omitempty"`
}

type yamlDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value,omitempty"`
	RateLimit      *yamlPolicy      `yaml:"rate_limit,omitempty"`
	Descriptors    []yamlDescriptor `yaml:"descriptors,omitempty"`
	ShadowMode     bool             `yaml:"shadow_mode,omitempty"`
	DetailedMetric bool             `yaml:"detailed_metric,omitempty"`
	QuotaMode      bool             `yaml:"quota_mode,omitempty"`
}

type yamlPolicy struct {
	Unit            string        `yaml:"unit,omitempty"`
	RequestsPerUnit *uint32       `yaml:"requests_per_unit,omitempty"`
	Unlimited       bool          `yaml:"unlimited,omitempty"`
	Name            string        `yaml:"name,omitempty"`
	Replaces        []yamlReplace `yaml:"replaces,omitempty"`
}

type yamlReplace struct {
	Name string `yaml:"name"`
}

// resourceFile names the resource in errors the way an operator finds it
// in the control plane: by its name.
func resourceFile(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("xds resource #%d", i)
	}
	return "xds resource " + name
}

// ToFile renders one RateLimitConfig as the YAML file it stands for. The
// proto has no field for ratelimitd's extensions (algorithm, burst, ...),
// so every xDS rule is a fixed window, as in envoyproxy/ratelimit.
func ToFile(name string, c *rlsconfv3.RateLimitConfig) (config.File, error) {
	doc := yamlConfig{Domain: c.GetDomain(), Descriptors: descriptors(c.GetDescriptors())}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return config.File{}, fmt.Errorf("%s: rendering: %w", name, err)
	}
	return config.File{Name: name, Data: data}, nil
}

func descriptors(in []*rlsconfv3.RateLimitDescriptor) []yamlDescriptor {
	out := make([]yamlDescriptor, 0, len(in))
	for _, d := range in {
		out = append(out, yamlDescriptor{
			Key:            d.GetKey(),
			Value:          d.GetValue(),
			RateLimit:      policy(d.GetRateLimit()),
			Descriptors:    descriptors(d.GetDescriptors()),
			ShadowMode:     d.GetShadowMode(),
			DetailedMetric: d.GetDetailedMetric(),
			QuotaMode:      quotaMode(d),
		})
	}
	return out
}

// quotaModeField is RateLimitDescriptor.quota_mode's number. The proto
// gained it after the go-control-plane release this module builds with,
// so it arrives as an unknown field; Envoy AI Gateway sets it on every
// descriptor it serves.
const quotaModeField = 7

// quotaMode reads quota_mode from d's unknown fields (the last occurrence
// wins, as protobuf merges a repeated scalar).
func quotaMode(d *rlsconfv3.RateLimitDescriptor) bool {
	b := d.ProtoReflect().GetUnknown()
	on := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return on
		}
		b = b[n:]
		if num == quotaModeField && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return on
			}
			on, b = v != 0, b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return on
		}
		b = b[m:]
	}
	return on
}

// policy keeps every field the proto sets, so that the loader refuses the
// same combinations it refuses in a file (an unknown unit, a unit next to
// unlimited) instead of this conversion dropping them.
func policy(p *rlsconfv3.RateLimitPolicy) *yamlPolicy {
	if p == nil {
		return nil
	}
	y := &yamlPolicy{Unlimited: p.GetUnlimited(), Name: p.GetName()}
	if u := p.GetUnit(); u != rlsconfv3.RateLimitUnit_UNKNOWN || !p.GetUnlimited() {
		y.Unit = strings.ToLower(u.String())
	}
	if n := p.GetRequestsPerUnit(); n != 0 || !p.GetUnlimited() {
		y.RequestsPerUnit = &n
	}
	for _, r := range p.GetReplaces() {
		y.Replaces = append(y.Replaces, yamlReplace{Name: r.GetName()})
	}
	return y
}

// Parse loads a state-of-the-world response's resources into one Config.
// Errors name the resource and the field; line numbers refer to the
// rendered YAML and are dropped as meaningless to the control plane.
func Parse(resources []*anypb.Any, opts ...config.Option) (*config.Config, error) {
	files := make([]config.File, 0, len(resources))
	var errs []error
	for i, res := range resources {
		if res.GetTypeUrl() != TypeURL {
			errs = append(errs, fmt.Errorf("resource #%d: type %q, want %q", i, res.GetTypeUrl(), TypeURL))
			continue
		}
		var c rlsconfv3.RateLimitConfig
		if err := res.UnmarshalTo(&c); err != nil {
			errs = append(errs, fmt.Errorf("resource #%d: %w", i, err))
			continue
		}
		f, err := ToFile(resourceFile(i, c.GetName()), &c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, f)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg, err := config.Parse(files, opts...)
	if err != nil {
		return nil, withoutLines(err)
	}
	return cfg, nil
}

func withoutLines(err error) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		var ce *config.Error
		if errors.As(e, &ce) {
			c := *ce
			c.Line = 0
			out = append(out, &c)
			continue
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}
