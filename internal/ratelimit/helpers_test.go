package ratelimit_test

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// epoch is aligned to every unit, so a test that advances the clock by d
// sees windows d into their span.
var epoch = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// staticConfig is a ConfigSource that never changes.
type staticConfig struct{ cfg *config.Config }

func (s staticConfig) Current() *config.Config { return s.cfg }

func parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(yaml)}})
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	return cfg
}

// fixture is a Service over a memstore stepping a fake clock.
type fixture struct {
	svc   *ratelimit.Service
	clock *storetest.Clock
	store store.Store
}

func newFixture(t *testing.T, yaml string, opts ...ratelimit.Option) *fixture {
	t.Helper()
	clock := storetest.NewClock(epoch)
	st := memstore.New(memstore.WithClock(clock.Now))
	t.Cleanup(func() { _ = st.Close() })
	return &fixture{svc: ratelimit.New(staticConfig{parse(t, yaml)}, st, opts...), clock: clock, store: st}
}

func (f *fixture) call(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.svc.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", prototext.Format(req), err)
	}
	return resp
}

func descs(ds ...*ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor { return ds }

func request(domain string, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func withOverride(d *ratelimitv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

const (
	OK   = rlsv3.RateLimitResponse_OK
	OVER = rlsv3.RateLimitResponse_OVER_LIMIT
)

// bare is the status of a descriptor no limit applies to.
func bare() *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: OK}
}

func limited(code rlsv3.RateLimitResponse_Code, rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, name string, remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               code,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: rpu, Unit: unit, Name: name},
		LimitRemaining:     remaining,
		DurationUntilReset: durationpb.New(reset),
	}
}

func response(code rlsv3.RateLimitResponse_Code, statuses ...*rlsv3.RateLimitResponse_DescriptorStatus) *rlsv3.RateLimitResponse {
	return &rlsv3.RateLimitResponse{OverallCode: code, Statuses: statuses}
}

func assertResponse(t *testing.T, step int, got, want *rlsv3.RateLimitResponse) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("step %d:\n got: %s\nwant: %s", step, prototext.Format(got), prototext.Format(want))
	}
}
