// Package rawgrpc lets a test send bytes no protobuf library would produce
// to a gRPC server. It is apart from internal/testkit so that test suites
// without gRPC (pkg/queue/queuetest) do not import gRPC through testkit.
package rawgrpc

import (
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Codec is a gRPC codec that sends a request's []byte as it is; replies
// decode as protobuf. Use it with grpc.ForceCodecV2.
type Codec struct{}

func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// Name is "proto": the server must take the bytes for a protobuf message.
func (Codec) Name() string { return "proto" }
