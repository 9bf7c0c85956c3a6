package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// modelServer answers ShouldRateLimit the way envoyproxy/ratelimit's Redis
// backend (fixed window) does, as a cost model to measure next to
// ratelimitd in the same run: per descriptor the key
// domain_key_value_..._windowstart, and per request one pipeline of
// INCRBY key hits + EXPIRE key unit-seconds per descriptor (its
// pipelineAppend), a pool of 10 connections (its REDIS_POOL_SIZE default)
// and no coalescing across requests (its REDIS_PIPELINE_WINDOW default 0).
// Every descriptor has the one limit given on the command line: the model
// is about what Redis does per decision, not about matching rules.
type modelServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	client *redis.Client
	unit   int64 // window length, seconds
	limit  uint32
}

func (m *modelServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	hits := uint64(max(req.GetHitsAddend(), 1))
	now := time.Now().Unix()
	window := now / m.unit * m.unit
	pipe := m.client.Pipeline()
	incrs := make([]*redis.IntCmd, len(req.Descriptors))
	for i, d := range req.Descriptors {
		key := modelKey(req.Domain, d.GetEntries(), window)
		incrs[i] = pipe.IncrBy(ctx, key, int64(hits))
		pipe.Expire(ctx, key, time.Duration(m.unit)*time.Second)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	reset := durationpb.New(time.Duration(m.unit-now%m.unit) * time.Second)
	limit := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: m.limit, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND}
	for _, c := range incrs {
		count := uint64(c.Val())
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: limit, DurationUntilReset: reset}
		if count > uint64(m.limit) {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		} else {
			st.LimitRemaining = m.limit - uint32(count)
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	return resp, nil
}

// modelKey is envoyproxy/ratelimit's cache key: domain, then key_value_
// per entry, then the window's start in Unix seconds.
func modelKey(domain string, entries []*rlcommon.RateLimitDescriptor_Entry, window int64) string {
	n := len(domain) + 21
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 2
	}
	b := make([]byte, 0, n)
	b = append(b, domain...)
	b = append(b, '_')
	for _, e := range entries {
		b = append(b, e.Key...)
		b = append(b, '_')
		b = append(b, e.Value...)
		b = append(b, '_')
	}
	return string(strconv.AppendInt(b, window, 10))
}

// serveModel runs the model in this process (rlbench re-executes itself
// with -serve-model), printing the address it listens on, until SIGTERM.
func serveModel(addr, redisAddr string, unit time.Duration, limit uint64) error {
	if unit < time.Second || limit > math.MaxUint32 {
		return fmt.Errorf("model: unit %s (want >= 1s), limit %d (want a uint32)", unit, limit)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	client := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 10, DisableIdentity: true, Protocol: 2})
	defer client.Close()
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, &modelServer{client: client, unit: int64(unit / time.Second), limit: uint32(limit)})
	return serveUntilSignal(srv, ln)
}
