package client

import (
	"context"
	"fmt"
	"iter"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/grpc/metadata"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
)

// Entry is one key and value of a descriptor.
type Entry struct{ Key, Value string }

// Descriptor is a request descriptor's entries, in order.
type Descriptor []Entry

// Proto is d as a RateLimitRequest's descriptor.
func (d Descriptor) Proto() *ratelimitv3.RateLimitDescriptor {
	entries := make([]*ratelimitv3.RateLimitDescriptor_Entry, len(d))
	for i, e := range d {
		entries[i] = &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value}
	}
	return &ratelimitv3.RateLimitDescriptor{Entries: entries}
}

// Rule is the rule a descriptor matched, as configured.
type Rule struct {
	StatKey         string // envoyproxy's stats key, e.g. "api.user"
	Name            string // rate_limit.name, when set
	Source          string // file:line of the rule
	Algorithm       string
	RequestsPerUnit uint32
	Unit            string        // SECOND, MINUTE, ...
	Period          time.Duration // the window, or the refill period
	Capacity        uint64        // requests_per_unit for windows, burst for buckets
	Mode            string        // ENFORCE, SHADOW or QUOTA
}

// Counter is what Get reports for one descriptor; see docs/counters.md for
// what Used means per algorithm.
type Counter struct {
	Status     adminv1.Status // COUNTED, UNLIMITED, REPLACED or NO_RULE
	Rule       Rule           // zero for NO_RULE
	Key        string         // the store key (COUNTED only)
	Used       uint64
	Remaining  uint64
	ResetAfter time.Duration
	OverLimit  bool
	RetryAfter time.Duration // when OverLimit
}

// ResetCounter is what Reset did for one descriptor.
type ResetCounter struct {
	Status  adminv1.Status
	Rule    Rule
	Key     string
	Existed bool // the counter was live and is now deleted
}

// ListedCounter is one counter of a domain, with the entries it counts
// (ready for Get or Reset).
type ListedCounter struct {
	Key       string
	Entries   Descriptor
	Algorithm string
	Period    time.Duration
}

// Counters calls ratelimitd.admin.v1.Counters, which is served only when the
// server has an admin credential (ADMIN_TOKEN_FILE or ADMIN_CLIENT_SAN):
// calls without it fail with codes.Unauthenticated, and with
// codes.Unimplemented where the API is off.
type Counters struct {
	c     adminv1.CountersClient
	token string
}

func (c *Counters) auth(ctx context.Context) context.Context {
	if c.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
}

// Get reads the counters the descriptors would charge in domain, charging
// nothing: one Counter per descriptor, in order.
func (c *Counters) Get(ctx context.Context, domain string, descriptors ...Descriptor) ([]Counter, error) {
	res, err := c.c.Get(c.auth(ctx), &adminv1.GetRequest{Domain: domain, Descriptors: toAdmin(descriptors)})
	if err != nil {
		return nil, fmt.Errorf("client: counters get: %w", err)
	}
	out := make([]Counter, len(res.GetCounters()))
	for i, k := range res.GetCounters() {
		out[i] = Counter{
			Status: k.GetStatus(), Rule: ruleOf(k.GetRule()), Key: k.GetKey(),
			Used: k.GetUsed(), Remaining: k.GetRemaining(), ResetAfter: k.GetResetAfter().AsDuration(),
			OverLimit: k.GetOverLimit(), RetryAfter: k.GetRetryAfter().AsDuration(),
		}
	}
	return out, nil
}

// Reset deletes the counters the descriptors would charge in domain, giving
// their quota back; deleted counts those that existed.
func (c *Counters) Reset(ctx context.Context, domain string, descriptors ...Descriptor) (counters []ResetCounter, deleted int, err error) {
	res, err := c.c.Reset(c.auth(ctx), &adminv1.ResetRequest{Domain: domain, Descriptors: toAdmin(descriptors)})
	if err != nil {
		return nil, 0, fmt.Errorf("client: counters reset: %w", err)
	}
	out := make([]ResetCounter, len(res.GetCounters()))
	for i, k := range res.GetCounters() {
		out[i] = ResetCounter{Status: k.GetStatus(), Rule: ruleOf(k.GetRule()), Key: k.GetKey(), Existed: k.GetExisted()}
	}
	return out, int(res.GetDeleted()), nil
}

// List returns one page of domain's counters (pageSize 0: the server's
// default, 100) and the token of the next page, "" at the end. A page may
// be short, even empty, before the end: only the token says it is over.
func (c *Counters) List(ctx context.Context, domain string, pageSize int, pageToken string) ([]ListedCounter, string, error) {
	if pageSize < 0 {
		return nil, "", fmt.Errorf("client: counters list: page size %d is negative", pageSize)
	}
	res, err := c.c.List(c.auth(ctx), &adminv1.ListRequest{Domain: domain, PageSize: uint32(pageSize), PageToken: pageToken})
	if err != nil {
		return nil, "", fmt.Errorf("client: counters list: %w", err)
	}
	out := make([]ListedCounter, len(res.GetCounters()))
	for i, k := range res.GetCounters() {
		entries := make(Descriptor, len(k.GetEntries()))
		for j, e := range k.GetEntries() {
			entries[j] = Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		out[i] = ListedCounter{Key: k.GetKey(), Entries: entries, Algorithm: k.GetAlgorithm(), Period: k.GetPeriod().AsDuration()}
	}
	return out, res.GetNextPageToken(), nil
}

// All pages through every counter of domain with List; it stops at the
// first error, which it yields.
func (c *Counters) All(ctx context.Context, domain string) iter.Seq2[ListedCounter, error] {
	return func(yield func(ListedCounter, error) bool) {
		token := ""
		for {
			page, next, err := c.List(ctx, domain, 0, token)
			if err != nil {
				yield(ListedCounter{}, err)
				return
			}
			for _, k := range page {
				if !yield(k, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}

func toAdmin(descriptors []Descriptor) []*adminv1.Descriptor {
	out := make([]*adminv1.Descriptor, len(descriptors))
	for i, d := range descriptors {
		entries := make([]*adminv1.Entry, len(d))
		for j, e := range d {
			entries[j] = &adminv1.Entry{Key: e.Key, Value: e.Value}
		}
		out[i] = &adminv1.Descriptor{Entries: entries}
	}
	return out
}

func ruleOf(r *adminv1.Rule) Rule {
	if r == nil {
		return Rule{}
	}
	return Rule{
		StatKey: r.GetStatKey(), Name: r.GetName(), Source: r.GetSource(), Algorithm: r.GetAlgorithm(),
		RequestsPerUnit: r.GetRequestsPerUnit(), Unit: r.GetUnit(), Period: r.GetPeriod().AsDuration(),
		Capacity: r.GetCapacity(), Mode: r.GetMode(),
	}
}
