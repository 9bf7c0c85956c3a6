package admin

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Get implements adminv1.CountersServer.
func (s *Server) Get(ctx context.Context, r *adminv1.GetRequest) (*adminv1.GetResponse, error) {
	got, err := s.counters.Inspect(ctx, r.GetDomain(), descriptors(r.GetDescriptors()))
	if err != nil {
		return nil, err
	}
	resp := &adminv1.GetResponse{Counters: make([]*adminv1.Counter, len(got))}
	for i, c := range got {
		pc := &adminv1.Counter{Status: statusOf(c.Status), Rule: ruleOf(c), Key: c.Key}
		if c.Status == service.Counted {
			d := c.Decision
			pc.Remaining = d.Remaining
			// Used never exceeds the capacity, even when usage took the
			// counter past its limit (docs/counters.md: what it is per algorithm).
			capacity := c.Rule.Limit.Capacity()
			pc.Used = capacity - min(d.Remaining, capacity)
			pc.ResetAfter = durationpb.New(d.ResetAfter)
			pc.OverLimit = !d.Allowed
			if !d.Allowed && d.RetryAfter != algorithms.Never {
				pc.RetryAfter = durationpb.New(d.RetryAfter)
			}
		}
		resp.Counters[i] = pc
	}
	return resp, nil
}

// Reset implements adminv1.CountersServer.
func (s *Server) Reset(ctx context.Context, r *adminv1.ResetRequest) (*adminv1.ResetResponse, error) {
	descs := descriptors(r.GetDescriptors())
	got, err := s.counters.Counters(r.GetDomain(), descs)
	if err != nil {
		return nil, err
	}
	resp := &adminv1.ResetResponse{Counters: make([]*adminv1.ResetCounter, len(got))}
	var keys []string
	for i, c := range got {
		resp.Counters[i] = &adminv1.ResetCounter{Status: statusOf(c.Status), Rule: ruleOf(c), Key: c.Key}
		if c.Status == service.Counted {
			keys = append(keys, c.Keys...)
		}
	}
	who := caller(ctx)
	if len(keys) == 0 {
		s.log.Warn("counters reset: no counted rule matched", zap.String("by", who), zap.String("domain", r.GetDomain()), zap.Strings("descriptors", describe(descs)))
		return resp, nil
	}
	s.forget(keys...)
	existed, err := s.backend.Reset(ctx, keys)
	s.forget(keys...)
	if err != nil {
		s.log.Error("counters reset failed", zap.String("by", who), zap.String("domain", r.GetDomain()),
			zap.Strings("descriptors", describe(descs)), zap.Int("keys", len(keys)), zap.Error(err))
		return nil, ratelimit.BackendStatus(ctx, err)
	}
	k := 0
	for i, c := range resp.Counters {
		if c.Status != adminv1.Status_COUNTED {
			continue
		}
		// A descriptor's limits are reset together; it existed if any did.
		for range got[i].Keys {
			if existed[k] {
				c.Existed = true
				resp.Deleted++
			}
			k++
		}
	}
	s.metrics.resets.WithLabelValues(r.GetDomain()).Inc()
	s.metrics.resetCounters.WithLabelValues(r.GetDomain()).Add(float64(resp.Deleted))
	// Warn, so the default LOG_LEVEL keeps this audit line.
	s.log.Warn("counters reset", zap.String("by", who), zap.String("domain", r.GetDomain()),
		zap.Strings("descriptors", describe(descs)), zap.Int("keys", len(keys)), zap.Uint32("deleted", resp.Deleted))
	return resp, nil
}

// List implements adminv1.CountersServer.
func (s *Server) List(ctx context.Context, r *adminv1.ListRequest) (*adminv1.ListResponse, error) {
	domain := r.GetDomain()
	if domain == "" || len(domain) > maxDomainLen {
		return nil, status.Errorf(codes.InvalidArgument, "domain must be 1 to %d bytes", maxDomainLen)
	}
	size := int(r.GetPageSize())
	switch {
	case size == 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		return nil, status.Errorf(codes.InvalidArgument, "page_size %d is more than the maximum of %d", size, MaxPageSize)
	}
	cursor, err := base64.RawURLEncoding.DecodeString(r.GetPageToken())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "page_token is not one List returned")
	}
	budget := s.listBudget
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl)/2)
	}
	keys, next, err := s.backend.List(ctx, s.keys.DomainPrefix(domain), string(cursor), size, time.Now().Add(budget))
	if err != nil {
		if errors.Is(err, store.ErrBadCursor) {
			return nil, status.Error(codes.InvalidArgument, "page_token is not one List returned")
		}
		return nil, ratelimit.BackendStatus(ctx, err)
	}
	resp := &adminv1.ListResponse{NextPageToken: base64.RawURLEncoding.EncodeToString([]byte(next))}
	for _, k := range keys {
		pk, err := s.keys.ParseKey(k)
		if err != nil || pk.Domain != domain {
			continue // not a counter: another feature's key under the same prefix
		}
		lc := &adminv1.ListedCounter{Key: k, Algorithm: pk.Algorithm, Period: durationpb.New(pk.Period)}
		for _, e := range pk.Entries {
			lc.Entries = append(lc.Entries, &adminv1.Entry{Key: e.Key, Value: e.Value})
		}
		resp.Counters = append(resp.Counters, lc)
	}
	return resp, nil
}

func descriptors(in []*adminv1.Descriptor) [][]service.Entry {
	out := make([][]service.Entry, len(in))
	for i, d := range in {
		for _, e := range d.GetEntries() {
			out[i] = append(out[i], service.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
	}
	return out
}

// describe writes descriptors for the audit log, one "k=v,k=v" each.
func describe(descs [][]service.Entry) []string {
	out := make([]string, len(descs))
	for i, d := range descs {
		parts := make([]string, len(d))
		for j, e := range d {
			parts[j] = e.Key + "=" + e.Value
		}
		out[i] = strings.Join(parts, ",")
	}
	return out
}

func statusOf(s service.CounterStatus) adminv1.Status {
	switch s {
	case service.NoRule:
		return adminv1.Status_NO_RULE
	case service.Unlimited:
		return adminv1.Status_UNLIMITED
	case service.Replaced:
		return adminv1.Status_REPLACED
	case service.Counted:
		return adminv1.Status_COUNTED
	default:
		return adminv1.Status_STATUS_UNSPECIFIED
	}
}

func ruleOf(c service.Counter) *adminv1.Rule {
	r := c.Rule
	if r == nil {
		return nil
	}
	pr := &adminv1.Rule{StatKey: r.StatKey, Name: r.Name, Source: r.Source}
	if r.Unlimited {
		return pr
	}
	pr.Algorithm = r.Limit.Algorithm.String()
	pr.RequestsPerUnit = r.RequestsPerUnit
	pr.Unit = r.Unit.String()
	pr.Period = durationpb.New(r.Limit.Period)
	pr.Capacity = r.Limit.Capacity()
	if c.Status == service.Counted {
		pr.Mode = modeName(c.Mode)
	}
	return pr
}

func modeName(m algorithms.Mode) string {
	switch m {
	case algorithms.Shadow:
		return "SHADOW"
	case algorithms.Quota:
		return "QUOTA"
	default:
		return "ENFORCE"
	}
}
