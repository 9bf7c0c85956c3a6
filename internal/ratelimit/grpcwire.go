package ratelimit

import (
	"context"
	"errors"
	"io"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// wireRequest is what the guarded ShouldRateLimit handler asks the codec
// for: the decoded request, or why it was refused. gRPC turns every codec
// error into INTERNAL, so the codec reports a bad request here instead and
// the handler answers INVALID_ARGUMENT.
type wireRequest struct {
	req rlsv3.RateLimitRequest
	err error
}

// guardCodec is the proto codec, except that ShouldRateLimit requests are
// pre-scanned against the caps and decoded within the decode budget. Every
// other message (health, reflection, responses) goes to the proto codec
// untouched.
type guardCodec struct {
	encoding.CodecV2
	svc *Service
}

func (c guardCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(SelfDecoder); ok {
		d.DecodeGRPC(data)
		return nil
	}
	w, ok := v.(*wireRequest)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	// Most oversized shapes show in their first bytes: refuse them there,
	// before copying a message that arrived in many buffers into one.
	if err := c.svc.caps.prescan(prefix(data)); err != nil && !errors.Is(err, errMalformed) {
		w.err = status.Error(codes.InvalidArgument, err.Error())
		return nil
	}
	n, _ := c.svc.decode.acquire(context.Background(), int64(data.Len()))
	defer c.svc.decode.release(n)
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	if err := c.svc.caps.prescan(b); err != nil {
		w.err = status.Error(codes.InvalidArgument, err.Error())
		return nil
	}
	if err := proto.Unmarshal(b, &w.req); err != nil {
		w.err = status.Error(codes.InvalidArgument, errMalformed.Error()+": "+err.Error())
	}
	return nil
}

// SelfDecoder is a message of another service on the same port that checks
// its wire bytes against its own caps before decoding them (internal/rlqs'
// reports), and keeps any refusal for its handler to answer: gRPC would
// turn a codec error into INTERNAL.
type SelfDecoder interface {
	DecodeGRPC(data mem.BufferSlice)
}

// prefixBytes is how much of a message prefix examines: 65 empty
// descriptors take 130 bytes, 33 empty entries 66.
const prefixBytes = 4096

// prefix is the first bytes of data, without copying when its first buffer
// holds them. A caps error found in a prefix holds for the whole message:
// prescan reports one only on fields it consumed entirely, and a field cut
// short reads as malformed, which the caller ignores.
func prefix(data mem.BufferSlice) []byte {
	if len(data) == 0 {
		return nil
	}
	if first := data[0].ReadOnlyData(); len(first) >= prefixBytes || len(data) == 1 {
		return first
	}
	b := make([]byte, prefixBytes)
	n, _ := io.ReadFull(data.Reader(), b)
	return b[:n]
}

// GRPCServerOptions are the options a gRPC server needs to serve the
// guarded RateLimitService of RegisterGRPC: the pre-scanning codec and a
// receive limit of the largest request the caps admit. A larger message is
// refused by gRPC itself with RESOURCE_EXHAUSTED (its code for this), from
// the length prefix alone, before its bytes are read: answering
// INVALID_ARGUMENT instead would mean reading it first.
func (s *Service) GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(guardCodec{CodecV2: encoding.GetCodecV2("proto"), svc: s}),
		grpc.MaxRecvMsgSize(s.MaxRequestBytes()),
	}
}

// MaxRequestBytes is the wire size of the largest request the caps admit.
func (s *Service) MaxRequestBytes() int { return s.caps.maxWireBytes() }

// RegisterGRPC registers the RateLimitService on srv with a handler that
// decodes through the guard codec; srv must be built with
// GRPCServerOptions.
func (s *Service) RegisterGRPC(srv *grpc.Server) {
	desc := rlsv3.RateLimitService_ServiceDesc
	desc.Methods = []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimitHandler}}
	srv.RegisterService(&desc, s)
}

func shouldRateLimitHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	w := new(wireRequest)
	svc := srv.(*Service)
	// A message over the receive limit fails in dec, from its length
	// prefix and unread, and gRPC's serverStream.RecvMsg has then already
	// written RESOURCE_EXHAUSTED: no code of ours can answer it otherwise.
	if err := dec(w); err != nil {
		return nil, err
	}
	handle := svc.grpcHandle
	if w.err != nil {
		handle = func(context.Context, any) (any, error) {
			svc.observeRejected()
			return nil, w.err
		}
	}
	if interceptor == nil {
		return handle(ctx, &w.req)
	}
	return interceptor(ctx, &w.req, svc.grpcInfo, handle)
}

// grpcUnary is the guarded ShouldRateLimit's info and handler for the
// interceptors, made once: built per call, they were two allocations a
// decision.
func (s *Service) grpcUnary() {
	s.grpcInfo = &grpc.UnaryServerInfo{Server: s, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}
	s.grpcHandle = func(ctx context.Context, req any) (any, error) {
		return s.ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
	}
}

// observeRejected counts a request refused before decoding like one
// refused by validate.
func (s *Service) observeRejected() {
	if s.obs != nil {
		s.obs.Request(codes.InvalidArgument.String(), 0)
		s.obs.ServiceError()
	}
}
