package ratelimit

import (
	"math"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Headers chooses the HTTP headers ratelimitd asks Envoy to add to the
// response. The zero value adds none.
type Headers struct {
	// Classic enables envoyproxy's LIMIT_RESPONSE_HEADERS_ENABLED headers,
	// named by Limit, Remaining and Reset (defaults below when empty).
	Classic                 bool
	Limit, Remaining, Reset string
	// Draft adds the IETF structured fields RateLimit-Policy and RateLimit
	// (draft-ietf-httpapi-ratelimit-headers).
	Draft bool
	// RetryAfter adds Retry-After (whole seconds) to an OVER_LIMIT answer.
	RetryAfter bool
	// Request adds envoyproxy's LIMIT_REQUEST_HEADERS_ENABLED headers to
	// the request Envoy forwards upstream (request_headers_to_add), from
	// the same descriptor as Classic, named by RequestLimit,
	// RequestRemaining and RequestReset (the defaults below when empty).
	Request                                      bool
	RequestLimit, RequestRemaining, RequestReset string
	// AllLimits adds ratelimit-limit-<unit>s and ratelimit-remaining-<unit>s
	// for every counted limit of the request, in request order
	// (LIMIT_ALL_DESCRIPTORS_HEADERS_ENABLED, envoyproxy's open PR #1190).
	AllLimits bool
}

// Default header names, as envoyproxy names them.
const (
	DefaultLimitHeader     = "RateLimit-Limit"
	DefaultRemainingHeader = "RateLimit-Remaining"
	DefaultResetHeader     = "RateLimit-Reset"
)

func (h Headers) enabled() bool {
	return h.Classic || h.Draft || h.RetryAfter || h.Request || h.AllLimits
}

// constraining picks the descriptor the headers describe, as envoyproxy
// does: the counted one with the least remaining, except that a descriptor
// over its limit (and not a quota alternative) wins.
func constraining(p *plan, resp *rlsv3.RateLimitResponse) (slot, *rlsv3.RateLimitResponse_DescriptorStatus, bool) {
	var best slot
	var bestStatus *rlsv3.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, sl := range p.slots {
		st := resp.Statuses[i]
		if sl.kind != counted || st.GetCurrentLimit() == nil {
			continue
		}
		if st.GetLimitRemaining() < least {
			best, bestStatus, least = sl, st, st.GetLimitRemaining()
		}
		if st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT && !sl.quota {
			best, bestStatus, least = sl, st, 0
		}
	}
	return best, bestStatus, bestStatus != nil
}

// addHeaders fills resp.ResponseHeadersToAdd (and RequestHeadersToAdd)
// from the most constraining descriptor of the request; Retry-After
// considers every descriptor that holds the request back (see retryAfter).
func (s *Service) addHeaders(p *plan, results []store.Result, resp *rlsv3.RateLimitResponse) {
	if !s.headers.enabled() {
		return
	}
	add := func(key, value string) {
		resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, &corev3.HeaderValue{Key: key, Value: value})
	}
	if s.headers.AllLimits {
		// envoyproxy lists these before the classic headers.
		allLimits(p, results, add)
	}
	sl, st, ok := constraining(p, resp)
	if !ok {
		return
	}
	limit := strconv.FormatUint(uint64(st.GetCurrentLimit().GetRequestsPerUnit()), 10)
	remaining := strconv.FormatUint(uint64(st.GetLimitRemaining()), 10)
	reset := ceilSeconds(st.GetDurationUntilReset().AsDuration())
	if s.headers.Classic {
		add(orDefault(s.headers.Limit, DefaultLimitHeader), limit)
		add(orDefault(s.headers.Remaining, DefaultRemainingHeader), remaining)
		add(orDefault(s.headers.Reset, DefaultResetHeader), strconv.FormatInt(reset, 10))
	}
	if s.headers.Request {
		resp.RequestHeadersToAdd = append(resp.RequestHeadersToAdd,
			&corev3.HeaderValue{Key: orDefault(s.headers.RequestLimit, DefaultLimitHeader), Value: limit},
			&corev3.HeaderValue{Key: orDefault(s.headers.RequestRemaining, DefaultRemainingHeader), Value: remaining},
			&corev3.HeaderValue{Key: orDefault(s.headers.RequestReset, DefaultResetHeader), Value: strconv.FormatInt(reset, 10)})
	}
	if s.headers.Draft {
		add("RateLimit-Policy", policies(p, sl))
		add("RateLimit", policyName(p.rules[sl.decider])+";r="+remaining+";t="+strconv.FormatInt(reset, 10))
	}
	if s.headers.RetryAfter && resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		add("Retry-After", strconv.FormatInt(max(ceilSeconds(retryAfter(p, results)), 1), 10))
	}
}

// allLimits adds a limit and a remaining header per counted limit, named
// by the limit's unit in the plural (ratelimit-limit-minutes), as
// envoyproxy's PR #1190 does per descriptor; a descriptor with several
// limits (rate_limits) gives one pair per limit.
func allLimits(p *plan, results []store.Result, add func(key, value string)) {
	for _, sl := range p.slots {
		if sl.kind != counted {
			continue
		}
		for j := sl.req; j < sl.req+sl.n; j++ {
			r := p.rules[j]
			unit := strings.ToLower(r.Unit.String()) + "s"
			add("ratelimit-limit-"+unit, strconv.FormatUint(uint64(r.RequestsPerUnit), 10))
			add("ratelimit-remaining-"+unit, strconv.FormatUint(min(results[j].Decision.Remaining, math.MaxUint32), 10))
		}
	}
}

// policies is the draft's RateLimit-Policy list: one item per counted
// limit of the constraining descriptor (several with rate_limits), the
// RateLimit field naming the one that decided it.
func policies(p *plan, sl slot) string {
	var b strings.Builder
	for j := sl.req; j < sl.req+sl.n; j++ {
		if j > sl.req {
			b.WriteString(", ")
		}
		r := p.rules[j]
		b.WriteString(policyName(r))
		b.WriteString(";q=")
		b.WriteString(strconv.FormatUint(uint64(r.RequestsPerUnit), 10))
		b.WriteString(";w=")
		b.WriteString(strconv.FormatInt(ceilSeconds(r.Limit.Period), 10))
	}
	return b.String()
}

// policyName is the draft's policy item key: a structured-field string of
// the limit's name, or of its stats key when it has none (with "#index"
// for the second limit of a rate_limits on, so that names stay distinct).
func policyName(r *config.Rule) string {
	name := r.Name
	if name == "" {
		name = r.StatKey
		if r.Index > 0 {
			name += "#" + strconv.Itoa(r.Index)
		}
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range name {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			b.WriteByte('_') // sf-string allows printable ASCII only
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
