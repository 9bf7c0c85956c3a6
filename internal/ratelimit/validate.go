package ratelimit

import (
	"fmt"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

type caps struct {
	descriptors int
	entries     int
	valueLen    int
}

// validate rejects what envoyproxy rejects (no domain, no descriptors) plus
// what would make one call unreasonably expensive or ambiguous. Each message
// names the offending descriptor and entry so a client can find its bug.
func (c caps) validate(req *rlsv3.RateLimitRequest) error {
	if req.GetDomain() == "" {
		return fmt.Errorf("rate limit domain must not be empty")
	}
	if len(req.GetDomain()) > c.valueLen {
		return fmt.Errorf("domain is %d bytes long, more than the maximum of %d", len(req.GetDomain()), c.valueLen)
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return fmt.Errorf("rate limit descriptor list must not be empty")
	}
	if len(descs) > c.descriptors {
		return fmt.Errorf("%d descriptors, more than the maximum of %d", len(descs), c.descriptors)
	}
	for i, d := range descs {
		entries := d.GetEntries()
		if len(entries) > c.entries {
			return fmt.Errorf("descriptor %d has %d entries, more than the maximum of %d", i, len(entries), c.entries)
		}
		for j, e := range entries {
			if e.GetKey() == "" {
				return fmt.Errorf("descriptor %d entry %d has an empty key", i, j)
			}
			if len(e.GetKey()) > c.valueLen {
				return fmt.Errorf("descriptor %d entry %d key is %d bytes long, more than the maximum of %d", i, j, len(e.GetKey()), c.valueLen)
			}
			if len(e.GetValue()) > c.valueLen {
				return fmt.Errorf("descriptor %d entry %d (key %q) value is %d bytes long, more than the maximum of %d", i, j, e.GetKey(), len(e.GetValue()), c.valueLen)
			}
		}
		// Beyond MaxCount the Lua scripts lose exactness, and no limit can
		// admit that many hits anyway.
		if h := d.GetHitsAddend(); h != nil && h.GetValue() > algorithms.MaxCount {
			return fmt.Errorf("descriptor %d hits_addend %d is more than the maximum of %d", i, h.GetValue(), uint64(algorithms.MaxCount))
		}
	}
	return nil
}
