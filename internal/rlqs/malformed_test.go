package rlqs_test

import (
	"strings"
	"testing"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/internal/testkit/rawgrpc"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// TestMalformedReports: a report the server cannot take ends its stream
// with INVALID_ARGUMENT saying why; the sizes are checked as the report
// is read, before anything is kept; the server goes on serving other
// streams.
func TestMalformedReports(t *testing.T) {
	clock := rlqstest.NewClock(windowStart)
	st := memstore.New(memstore.WithClock(clock.Now))
	rep := startReplica(t, newRules(t, kindsRules), st, clock, rlqs.WithMaxBuckets(3), rlqs.WithLimits(2, 16))
	ok := usage("d", map[string]string{"window": "a"}, 1)
	many := usage("d", map[string]string{"window": "a"}, 1)
	for i := range 3 {
		many.BucketQuotaUsages = append(many.BucketQuotaUsages, usage("d", map[string]string{"window": string(rune('b' + i))}, 1).BucketQuotaUsages...)
	}
	tests := []struct {
		name    string
		reports []*rlqsv3.RateLimitQuotaUsageReports
		want    string
	}{
		{"no domain", []*rlqsv3.RateLimitQuotaUsageReports{usage("", map[string]string{"window": "a"}, 1)}, "must name its domain"},
		{"domain changed", []*rlqsv3.RateLimitQuotaUsageReports{ok, usage("other", map[string]string{"window": "a"}, 1)}, `domain changed from "d" to "other"`},
		{"no bucket id", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "d", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{NumRequestsAllowed: 1}}}}, "bucket_quota_usages[0]: bucket_id missing"},
		{"empty key", []*rlqsv3.RateLimitQuotaUsageReports{usage("d", map[string]string{"": "a"}, 1)}, "an empty key"},
		{"negative time", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "d", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"window": "a"}}, TimeElapsed: &durationpb.Duration{Seconds: -1}}}}}, "negative time_elapsed"},
		{"too many buckets", []*rlqsv3.RateLimitQuotaUsageReports{many}, "more than 3 buckets in one report"},
		{"too many entries", []*rlqsv3.RateLimitQuotaUsageReports{usage("d", map[string]string{"a": "1", "b": "2", "c": "3"}, 1)}, "more than 2 entries"},
		{"value too long", []*rlqsv3.RateLimitQuotaUsageReports{usage("d", map[string]string{"window": "a value over sixteen bytes"}, 1)}, "a key or value of 26 bytes, at most 16"},
		{"domain too long", []*rlqsv3.RateLimitQuotaUsageReports{usage("a domain over sixteen bytes", map[string]string{"window": "a"}, 1)}, "domain: 27 bytes, at most 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := exchange(t, rep.addr, tt.reports...)
			wantInvalid(t, err, tt.want)
		})
	}
	// A report that is not protobuf, and one whose value is not UTF-8,
	// sent as bytes (a protobuf client refuses to marshal the second).
	entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "window")
	entry = protowire.AppendString(protowire.AppendTag(entry, 2, protowire.BytesType), "\xff")
	id := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)
	u := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), id)
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "d")
	badUTF8 = protowire.AppendBytes(protowire.AppendTag(badUTF8, 2, protowire.BytesType), u)
	for _, raw := range []struct {
		name  string
		bytes []byte
		want  string
	}{{"not protobuf", []byte{0x12, 0x7f, 0x01}, "malformed report"}, {"not UTF-8", badUTF8, "not UTF-8"}} {
		t.Run(raw.name, func(t *testing.T) {
			conn, err := dial(rep.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
			s, err := conn.NewStream(t.Context(), desc, rlqsv3.RateLimitQuotaService_StreamRateLimitQuotas_FullMethodName, grpc.ForceCodecV2(rawgrpc.Codec{}))
			if err != nil {
				t.Fatal(err)
			}
			_ = s.SendMsg(raw.bytes)
			var resp rlqsv3.RateLimitQuotaResponse
			wantInvalid(t, s.RecvMsg(&resp), raw.want)
		})
	}
	resps, err := exchange(t, rep.addr, ok)
	if err != nil || len(resps) != 1 {
		t.Fatalf("a good report after the bad ones: %v, %v", resps, err)
	}
	if got := rep.srv.Stats().Rejected; got != int64(len(tests)+2) {
		t.Errorf("Stats().Rejected = %d, want %d", got, len(tests)+2)
	}
}

func wantInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("stream ended with %v, want InvalidArgument", err)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, want) {
		t.Errorf("message %q lacks %q", msg, want)
	}
}
