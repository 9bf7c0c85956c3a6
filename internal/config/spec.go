package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
)

// The keys allowed at each level mirror envoyproxy/ratelimit's YAML, plus
// our extensions: value_regex and lease on descriptors, algorithm, burst,
// unit_multiplier, refill_interval, max_debt and on_store_error on
// rate_limit, and rate_limits, a list of such blocks.
func rootKeys() []string { return []string{"domain", "descriptors"} }

func descriptorKeys() []string {
	return []string{"key", "value", "value_regex", "rate_limit", "rate_limits", "descriptors", "shadow_mode", "detailed_metric",
		"value_to_metric", "share_threshold", "quota_mode", "metadata", "lease"}
}

func rateLimitKeys() []string {
	return []string{"unit", "requests_per_unit", "unlimited", "name", "replaces",
		"algorithm", "burst", "unit_multiplier", "refill_interval", "max_debt", "on_store_error"}
}

// fileSpec is one file, read and checked field by field but not yet merged
// with the other files.
type fileSpec struct {
	name        string
	domain      string
	domainNode  *yaml.Node
	descriptors []*descSpec
}

type descSpec struct {
	field string
	line  int
	key   string
	value string
	// regex is the compiled value_regex, regexLine its line.
	regex     *valueRegex
	regexLine int
	// invalid: the node's key or value is unusable (already reported), so
	// it is not indexed.
	invalid bool
	// rule is nil when the node has no rate_limit, or an invalid one;
	// limits are its rate_limits, nil when it has none or an invalid one.
	rule           *Rule
	limits         []*Rule
	shadowMode     bool
	detailedMetric bool
	valueToMetric  bool
	shareThreshold bool
	quotaMode      bool
	lease          Lease
	metadata       map[string]any
	children       []*descSpec
}

// readFile checks one file. It returns nil when the file has no domain to
// merge it into; its errors are in errs either way.
func readFile(f File, errs *errorList) *fileSpec {
	r := &reader{file: f.Name, errs: errs}
	root, ok := r.document(f.Data)
	if !ok {
		return nil
	}
	spec := &fileSpec{name: f.Name}
	if root == nil {
		errs.add(f.Name, 1, "domain", "missing: the file is empty")
		return nil
	}
	pairs, ok := r.fields(root, "", rootKeys()...)
	if !ok {
		return nil
	}
	domainOK := true
	for _, p := range pairs {
		switch p.name {
		case "domain":
			spec.domain, domainOK = r.str(p.val, "domain")
			spec.domainNode = p.key
		case "descriptors":
			spec.descriptors = r.descriptors(p.val, "descriptors")
		}
	}
	if r.aborted {
		return nil // a partial tree of an alias bomb is not worth indexing
	}
	if spec.domain == "" {
		if domainOK {
			line := root.Line
			if spec.domainNode != nil {
				line = spec.domainNode.Line
			}
			errs.add(f.Name, line, "domain", "missing or empty")
		}
		return nil
	}
	// A file with errors is still merged so that its duplicate keys are
	// reported too; Parse discards the result.
	return spec
}

func (r *reader) descriptors(n *yaml.Node, field string) []*descSpec {
	items, ok := r.list(n, field)
	if !ok {
		return nil
	}
	out := make([]*descSpec, 0, len(items))
	for i, item := range items {
		if d := r.descriptor(item, fmt.Sprintf("%s[%d]", field, i)); d != nil {
			out = append(out, d)
		}
	}
	return out
}

func (r *reader) descriptor(n *yaml.Node, field string) *descSpec {
	if !r.enter(n, field) {
		return nil
	}
	defer r.leave()
	pairs, ok := r.fields(n, field, descriptorKeys()...)
	if !ok {
		return nil
	}
	d := &descSpec{field: field, line: n.Line}
	var rateLimit, rateLimitKey, rateLimits, rateLimitsKey *yaml.Node
	var shareNode, leaseOn *yaml.Node
	var valuePair, regexPair *pair
	for _, p := range pairs {
		sub := yamldoc.Join(field, p.name)
		switch p.name {
		case "key":
			d.key, _ = r.str(p.val, sub)
			d.line = p.key.Line
		case "value":
			d.value, _ = r.str(p.val, sub)
			valuePair = &p
		case "value_regex":
			regexPair = &p
		case "rate_limit":
			rateLimit, rateLimitKey = p.val, p.key
		case "rate_limits":
			rateLimits, rateLimitsKey = p.val, p.key
		case "descriptors":
			d.children = r.descriptors(p.val, sub)
		case "shadow_mode":
			d.shadowMode, _ = r.boolean(p.val, sub)
		case "detailed_metric":
			d.detailedMetric, _ = r.boolean(p.val, sub)
		case "value_to_metric":
			d.valueToMetric, _ = r.boolean(p.val, sub)
		case "share_threshold":
			d.shareThreshold, _ = r.boolean(p.val, sub)
			shareNode = p.key
		case "quota_mode":
			d.quotaMode, _ = r.boolean(p.val, sub)
		case "metadata":
			d.metadata, _ = r.metadata(p.val, sub)
		case "lease":
			if on, ok := r.boolean(p.val, sub); ok && !isNull(p.val) {
				d.lease = LeaseOff
				if on {
					d.lease, leaseOn = LeaseOn, p.key
				}
			}
		}
	}
	if d.key == "" {
		r.errorf(n, yamldoc.Join(field, "key"), "missing or empty: every descriptor needs a key")
		d.invalid = true
	}
	regexOK := true
	if regexPair != nil {
		regexOK = r.valueRegex(d, valuePair, *regexPair, yamldoc.Join(field, "value_regex"))
	}
	if d.shareThreshold && !strings.Contains(d.value, "*") && d.regex == nil && regexOK {
		r.errorf(shareNode, yamldoc.Join(field, "share_threshold"),
			"only applies to a wildcard value (containing \"*\") or a value_regex, got value %q", d.value)
	}
	hasRateLimit := rateLimit != nil && !isNull(rateLimit)
	if hasRateLimit {
		d.rule = r.rateLimit(rateLimitKey, rateLimit, yamldoc.Join(field, "rate_limit"), rateLimitKeys(), leaseOn)
	}
	if rateLimits != nil && !isNull(rateLimits) {
		if hasRateLimit {
			r.errorf(rateLimitsKey, yamldoc.Join(field, "rate_limits"), "must not be set together with rate_limit (list every limit in rate_limits)")
		} else {
			d.limits = r.rateLimits(rateLimitsKey, rateLimits, yamldoc.Join(field, "rate_limits"), leaseOn)
		}
	}
	return d
}

// valueRegex reads value_regex into d and reports false when it reported an
// error. One node has one way to match a value: with both value and
// value_regex, which one ranks where would be a guess, so that is an error.
func (r *reader) valueRegex(d *descSpec, value *pair, p pair, field string) bool {
	d.regexLine = p.key.Line
	pattern, ok := r.str(p.val, field)
	switch {
	case !ok:
	case value != nil:
		r.errorf(p.key, field, "set either value (line %d) or value_regex, not both", value.key.Line)
	case isNull(p.val):
		return true // null is absent, as for every other field
	case pattern == "":
		r.errorf(p.val, field, "empty (leave it out to match every value, or write ^$ for the empty value)")
	default:
		re, err := compileValueRegex(pattern)
		if err == nil {
			d.regex = re
			return true
		}
		r.errorf(p.val, field, "%v", err)
	}
	d.invalid = true
	return false
}
