package ratelimit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// envoyRule is one rule of a random envoyproxy-format config: a fixed
// window per minute on key (and value, when set).
type envoyRule struct {
	key, value   string
	limit        uint64
	shadow       bool
	quota        bool
	hasValueRule bool
}

// envoyModel answers as envoyproxy/ratelimit does, from the facts in
// ../shared/envoy-ratelimit-reference.md: every matched counter is
// incremented by its hits whatever the others answer; a descriptor is over
// when its count after the increment exceeds the limit; limit_remaining is
// what is left after it (0 when over); shadow_mode answers OK; the request
// is over when an enforced descriptor is, or when every quota descriptor is.
// A refund (is_negative_hits) decrements its counter, floored at 0, and
// answers OK with what is left.
type envoyModel struct {
	rules  []envoyRule
	counts map[string]uint64
}

type envoyStatus struct {
	limited   bool
	over      bool
	remaining uint64
}

// match is envoyproxy's walk for a one-entry descriptor: key_value first,
// then key alone.
func (m *envoyModel) match(key, value string) (envoyRule, bool) {
	for _, r := range m.rules {
		if r.key == key && r.value == value && value != "" {
			return r, true
		}
	}
	for _, r := range m.rules {
		if r.key == key && r.value == "" {
			return r, true
		}
	}
	return envoyRule{}, false
}

func (m *envoyModel) answer(req *rlsv3.RateLimitRequest) (over bool, st []envoyStatus) {
	quotaOps, quotaOver, enforcedOver := 0, 0, false
	for _, d := range req.GetDescriptors() {
		e := d.GetEntries()[0]
		r, ok := m.match(e.GetKey(), e.GetValue())
		if !ok {
			st = append(st, envoyStatus{})
			continue
		}
		c := r.key + "=" + e.GetValue()
		if d.GetIsNegativeHits() {
			// A refund (envoyproxy PR #1140): the counter decremented,
			// floored at 0; OK, never over, in no quota group.
			m.counts[c] -= min(m.counts[c], descriptorHits(req, d))
			st = append(st, envoyStatus{limited: true, remaining: r.limit - min(m.counts[c], r.limit)})
			continue
		}
		m.counts[c] += descriptorHits(req, d)
		s := envoyStatus{limited: true, over: m.counts[c] > r.limit}
		if !s.over {
			s.remaining = r.limit - m.counts[c]
		}
		switch {
		case r.shadow:
			s.over = false
		case r.quota:
			quotaOps++
			if s.over {
				quotaOver++
			}
		case s.over:
			enforcedOver = true
		}
		st = append(st, s)
	}
	return enforcedOver || (quotaOps > 0 && quotaOver == quotaOps), st
}

func descriptorHits(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	if n := req.GetHitsAddend(); n > 0 {
		return uint64(n)
	}
	return 1
}

func randomEnvoyConfig(rng *rand.Rand) ([]envoyRule, string) {
	var rules []envoyRule
	var b strings.Builder
	b.WriteString("domain: ref\ndescriptors:\n")
	for k := range 3 {
		key := fmt.Sprintf("k%d", k)
		for _, value := range []string{"", "v0"} {
			if rng.IntN(3) == 0 {
				continue
			}
			r := envoyRule{key: key, value: value, limit: uint64(rng.IntN(8)), shadow: rng.IntN(5) == 0}
			r.quota = !r.shadow && rng.IntN(4) == 0
			rules = append(rules, r)
			fmt.Fprintf(&b, "  - key: %s\n", key)
			if value != "" {
				fmt.Fprintf(&b, "    value: %s\n", value)
			}
			fmt.Fprintf(&b, "    rate_limit: {unit: minute, requests_per_unit: %d}\n", r.limit)
			if r.shadow {
				b.WriteString("    shadow_mode: true\n")
			}
			if r.quota {
				b.WriteString("    quota_mode: true\n")
			}
		}
	}
	if len(rules) == 0 {
		return randomEnvoyConfig(rng)
	}
	return rules, b.String()
}

func randomEnvoyRequest(rng *rand.Rand) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: "ref", HitsAddend: uint32(rng.IntN(3))}
	for range 1 + rng.IntN(3) {
		d := desc(fmt.Sprintf("k%d", rng.IntN(3)), []string{"v0", "v1", "v2"}[rng.IntN(3)])
		switch rng.IntN(4) {
		case 0:
			d = withHits(d, 0)
		case 1:
			d = withHits(d, 1+rng.Uint64N(6))
		}
		d.IsNegativeHits = rng.IntN(6) == 0
		req.Descriptors = append(req.Descriptors, d)
	}
	// ratelimitd applies a request's refunds before its other descriptors
	// (docs/compatibility.md), envoyproxy in their order: with the refunds
	// first the two agree.
	slices.SortStableFunc(req.Descriptors, func(a, b *ratelimitv3.RateLimitDescriptor) int {
		switch {
		case a.GetIsNegativeHits() == b.GetIsNegativeHits():
			return 0
		case a.GetIsNegativeHits():
			return -1
		}
		return 1
	})
	return req
}

// TestEnvoyproxyAnswers drives ratelimitd and a model of envoyproxy with the
// same random envoyproxy-format configs and request sequences, and holds
// ratelimitd to envoyproxy's answers except where docs/compatibility.md says
// otherwise:
//   - the overall code is always envoyproxy's;
//   - an admitted request answers and counts exactly as envoyproxy;
//   - a denied request records its usage as envoyproxy does and charges
//     nothing else; its descriptors keep envoyproxy's code unless an earlier
//     descriptor of the request named the same counter (envoyproxy counted
//     that one's uncharged hits), usage reports envoyproxy's
//     limit_remaining on the same condition, and the others report what is
//     left before the request;
//   - refunds are kept and answered as envoyproxy does (the requests put
//     them first, where envoyproxy and ratelimitd agree on the order).
//
// After a denied request the model takes ratelimitd's counts, so every
// step compares the two from the same state.
func TestEnvoyproxyAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 25))
	steps, denied := 0, 0
	for run := range 200 {
		rules, yaml := randomEnvoyConfig(rng)
		f := newFixture(t, yaml)
		m := &envoyModel{rules: rules, counts: map[string]uint64{}}
		var history []string
		for step := range 30 {
			req := randomEnvoyRequest(rng)
			before := make(map[string]uint64, len(m.counts))
			for k, v := range m.counts {
				before[k] = v
			}
			over, want := m.answer(req)
			got := f.call(t, req)
			history = append(history, fmt.Sprintf("%v counts %v", compact(req), m.counts)+" => "+compactResp(got))
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("run %d step %d: %s\nconfig:\n%s\nhistory:\n%s", run, step, fmt.Sprintf(format, args...), yaml, strings.Join(history, "\n"))
			}
			if (got.GetOverallCode() == OVER) != over {
				fail("overall %s, envoyproxy over=%v", got.GetOverallCode(), over)
			}
			steps++
			if over {
				denied++
				m.counts = before
			}
			named := map[string]bool{}
			for i, d := range req.GetDescriptors() {
				e := d.GetEntries()[0]
				r, limited := m.match(e.GetKey(), e.GetValue())
				counter := r.key + "=" + e.GetValue()
				refund := d.GetIsNegativeHits()
				usage := d.GetHitsAddend().GetValue() > 0 && !refund
				switch {
				case over && refund && limited:
					m.counts[counter] -= min(m.counts[counter], descriptorHits(req, d))
				case over && usage && limited:
					m.counts[counter] += d.GetHitsAddend().GetValue()
				}
				st, w := got.GetStatuses()[i], want[i]
				if (st.GetCurrentLimit() != nil) != limited {
					fail("descriptor %d: current_limit %v, matched a rule %v", i, st.GetCurrentLimit(), limited)
				}
				repeated := limited && named[counter]
				named[counter] = named[counter] || limited
				exact := !over || refund || (usage && !repeated)
				if (exact || !repeated) && (st.GetCode() == OVER) != w.over {
					fail("descriptor %d: code %s, envoyproxy over=%v", i, st.GetCode(), w.over)
				}
				if exact && limited && uint64(st.GetLimitRemaining()) != w.remaining {
					fail("descriptor %d: limit_remaining %d, envoyproxy %d", i, st.GetLimitRemaining(), w.remaining)
				}
			}
		}
	}
	t.Logf("%d requests, %d denied", steps, denied)
	if denied < steps/10 || denied > steps*9/10 {
		t.Errorf("%d of %d requests denied: the random configs explore one outcome only", denied, steps)
	}
}

func compact(req *rlsv3.RateLimitRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hits=%d", req.GetHitsAddend())
	for _, d := range req.GetDescriptors() {
		e := d.GetEntries()[0]
		fmt.Fprintf(&b, " %s=%s", e.GetKey(), e.GetValue())
		if d.GetIsNegativeHits() {
			b.WriteString("(refund)")
		}
		if h := d.GetHitsAddend(); h != nil {
			fmt.Fprintf(&b, "(%d)", h.GetValue())
		}
	}
	return b.String()
}

func compactResp(r *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(r.GetOverallCode().String())
	for _, s := range r.GetStatuses() {
		fmt.Fprintf(&b, " [%s %d]", s.GetCode(), s.GetLimitRemaining())
	}
	return b.String()
}
