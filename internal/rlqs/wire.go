package rlqs

import (
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// report is one RateLimitQuotaUsageReports as the stream receives it,
// read from its wire bytes (decode.go) within the caps, or why it was
// refused. gRPC turns a codec error into INTERNAL, so the refusal waits
// here for the handler, which answers INVALID_ARGUMENT.
//
// It is read straight into usages whose bucket ids are keys (bucketKey)
// in one arena: a report of 10,000 buckets is three allocations, not the
// 50,000 its protobuf message takes (a map per bucket id), which a
// server of many busy streams would otherwise collect every few seconds.
type report struct {
	domain string
	usages []usage
	keys   []byte // the usages' bucket keys, end to end
	err    error
	caps   caps
}

// usage is one BucketQuotaUsage.
type usage struct {
	key             [2]uint32 // the bucket key's bounds in report.keys
	pairs           int       // pairs in the bucket id
	hasID           bool
	allowed, denied uint64
	elapsed         int64 // time_elapsed's seconds (its nanos are only checked)
}

// keyOf is u's bucket key.
func (r *report) keyOf(u *usage) []byte { return r.keys[u.key[0]:u.key[1]] }

// DecodeGRPC checks data against the caps as it reads it: a report of
// 4 MiB of one-byte buckets would otherwise become a hundred times that in
// decoded messages before anything could count them. The gRPC port's
// codec (internal/ratelimit's, or ServerCodec's) calls it.
func (r *report) DecodeGRPC(data mem.BufferSlice) {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := r.decode(buf.ReadOnlyData()); err != nil {
		if errors.Is(err, errMalformed) {
			err = fmt.Errorf("malformed report: %w", err)
		}
		r.err = status.Error(codes.InvalidArgument, "rlqs: "+err.Error())
	}
}

// selfDecoder is what ServerCodec hands the bytes of a message that
// decodes itself (report).
type selfDecoder interface{ DecodeGRPC(mem.BufferSlice) }

// ServerCodec is the option a gRPC server that does not already force
// internal/ratelimit's codec (which does the same) needs for the RLQS
// service: reports are checked before they are decoded; every other
// message goes to the proto codec.
func ServerCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(codec{encoding.GetCodecV2("proto")})
}

type codec struct{ encoding.CodecV2 }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(selfDecoder); ok {
		d.DecodeGRPC(data)
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// caps bound a report as it is read.
type caps struct {
	buckets  int // bucket usages per report
	entries  int // pairs per bucket id
	valueLen int // bytes of the domain, of a key, of a value
}
