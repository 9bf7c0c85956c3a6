package config

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
)

// MaxLimits bounds a descriptor's rate_limits: each limit is one more
// counter that every request matching the descriptor reads and writes.
const MaxLimits = 16

// limitKeys are the keys of one rate_limits item: a rate_limit block less
// unlimited, which would make every other limit of the list moot.
func limitKeys() []string {
	return slices.DeleteFunc(rateLimitKeys(), func(k string) bool { return k == "unlimited" })
}

// rateLimits reads a descriptor's rate_limits, ratelimitd's list of limits
// decided together (see "Several limits per descriptor" in api/README.md),
// or reports why it cannot and returns nil.
func (r *reader) rateLimits(at, n *yaml.Node, field string, leaseKey *yaml.Node) []*Rule {
	items, ok := r.list(n, field)
	if !ok {
		return nil
	}
	switch {
	case len(items) == 0:
		r.errorf(at, field, "empty: list at least one limit, or leave rate_limits out")
		return nil
	case len(items) > MaxLimits:
		r.errorf(at, field, "%d limits, at most %d", len(items), MaxLimits)
		return nil
	}
	rules := make([]*Rule, len(items))
	valid := true
	names := map[string]int{}
	for i, item := range items {
		sub := fmt.Sprintf("%s[%d]", field, i)
		rules[i] = r.rateLimit(item, item, sub, limitKeys(), leaseKey)
		if rules[i] == nil {
			valid = false
			continue
		}
		name := rules[i].Name
		if name == "" {
			continue
		}
		if j, dup := names[name]; dup {
			r.errorf(item, yamldoc.Join(sub, "name"), "duplicate name %q (also %s[%d]): a limit's name tells which limit decided", name, field, j)
			valid = false
			continue
		}
		names[name] = i
	}
	if !valid {
		return nil
	}
	return r.checkSiblingReplaces(items, rules, names, field)
}

// checkSiblingReplaces refuses a limit that replaces another limit of the
// same descriptor: that limit would never count.
func (r *reader) checkSiblingReplaces(items []*yaml.Node, rules []*Rule, names map[string]int, field string) []*Rule {
	valid := true
	for i, rule := range rules {
		for k, name := range rule.Replaces {
			if j, sibling := names[name]; sibling && j != i {
				r.errorf(items[i], fmt.Sprintf("%s[%d].replaces[%d].name", field, i, k),
					"%q is %s[%d], a limit of the same descriptor: it would never count", name, field, j)
				valid = false
			}
		}
	}
	if !valid {
		return nil
	}
	return rules
}
