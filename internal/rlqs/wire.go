package rlqs

import (
	"errors"
	"fmt"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// report is one RateLimitQuotaUsageReports as the stream receives it:
// decoded after its sizes were checked on the wire bytes, or why it was
// refused. gRPC turns a codec error into INTERNAL, so the refusal waits
// here for the handler, which answers INVALID_ARGUMENT.
type report struct {
	msg  rlqsv3.RateLimitQuotaUsageReports
	err  error
	caps caps
}

// DecodeGRPC checks data against the caps, then decodes it: a report of
// 4 MiB of one-byte buckets would otherwise become a hundred times that in
// decoded messages before anything could count them. The gRPC port's
// codec (internal/ratelimit's, or ServerCodec's) calls it.
func (r *report) DecodeGRPC(data mem.BufferSlice) {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	if err := r.caps.scan(b); err != nil {
		r.err = status.Error(codes.InvalidArgument, "rlqs: "+err.Error())
		return
	}
	if err := proto.Unmarshal(b, &r.msg); err != nil {
		r.err = status.Error(codes.InvalidArgument, "rlqs: malformed report: "+err.Error())
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

// caps bound a report before it is decoded.
type caps struct {
	buckets  int // bucket usages per report
	entries  int // pairs per bucket id
	valueLen int // bytes of the domain, of a key, of a value
}

var errMalformed = errors.New("malformed report")

// scan walks a RateLimitQuotaUsageReports' wire bytes: domain (1) and
// bucket_quota_usages (2) are checked, other fields skipped.
func (c caps) scan(b []byte) error {
	buckets := 0
	return eachBytes(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			if len(v) > c.valueLen {
				return fmt.Errorf("domain: %d bytes, at most %d", len(v), c.valueLen)
			}
		case 2:
			if buckets++; buckets > c.buckets {
				return fmt.Errorf("bucket_quota_usages: more than %d buckets in one report", c.buckets)
			}
			return c.eachSub(v, 1, func(id []byte) error { return c.scanBucketID(id, buckets-1) })
		}
		return nil
	})
}

// scanBucketID checks a BucketId: at most entries pairs in its map (1), each
// key (1) and value (2) at most valueLen bytes.
func (c caps) scanBucketID(b []byte, i int) error {
	pairs := 0
	return c.eachSub(b, 1, func(pair []byte) error {
		if pairs++; pairs > c.entries {
			return fmt.Errorf("bucket_quota_usages[%d].bucket_id: more than %d entries", i, c.entries)
		}
		return c.eachSub(pair, -1, func(s []byte) error {
			if len(s) > c.valueLen {
				return fmt.Errorf("bucket_quota_usages[%d].bucket_id: a key or value of %d bytes, at most %d", i, len(s), c.valueLen)
			}
			return nil
		})
	})
}

// eachSub calls fn with the bytes of every length-delimited field numbered
// want in b (any number when want < 0), skipping the other fields.
func (c caps) eachSub(b []byte, want protowire.Number, fn func([]byte) error) error {
	return eachBytes(b, func(num protowire.Number, v []byte) error {
		if want >= 0 && num != want {
			return nil
		}
		return fn(v)
	})
}

// eachBytes calls fn with the number and bytes of every length-delimited
// field in b, skipping the fields of other wire types.
func eachBytes(b []byte, fn func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errMalformed
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}
