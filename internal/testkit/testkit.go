// Package testkit holds the small helpers several test packages share.
package testkit

import (
	"bytes"
	"sync"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// SyncBuffer is a bytes.Buffer that a child process (or logger) writes
// while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// RawCodec is a gRPC codec that sends a request's []byte as it is, so a
// test can send what no protobuf library would produce; replies decode as
// protobuf. Use it with grpc.ForceCodecV2.
type RawCodec struct{}

func (RawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// Name is "proto": the server must take the bytes for a protobuf message.
func (RawCodec) Name() string { return "proto" }
