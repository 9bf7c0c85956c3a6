// Package config loads envoyproxy/ratelimit's YAML rate-limit configuration
// (plus ratelimitd's algorithm extensions), matches request descriptors to
// rules the way envoyproxy does, builds the store keys of matched rules and
// reloads the configuration when its directory changes.
package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
)

// File is one configuration file: Name appears in error messages.
type File struct {
	Name string
	Data []byte
}

// Config is an immutable, loaded configuration. It is safe for concurrent
// use.
type Config struct {
	domains map[string]*domainTree
	names   []string // sorted
	// calendarMonths: WithCalendarMonths, which a request's own limit
	// (Config.OverrideRule) follows too; so does storeError
	// (WithStoreErrorDefault).
	calendarMonths bool
	storeError     StoreErrorAction
}

type domainTree struct {
	root  *node
	files []string // files that configure the domain, in load order
}

// Parse loads files in order. It returns every error of every file, joined;
// each is an *Error naming the file, line and field.
func Parse(files []File, opts ...Option) (*Config, error) {
	o := buildOptions(opts)
	c := &Config{domains: map[string]*domainTree{}, calendarMonths: o.calendarMonths, storeError: o.storeError}
	errs := &errorList{}
	for _, f := range files {
		spec := readFile(f, errs)
		if spec == nil {
			continue
		}
		c.addFile(spec, o, errs)
	}
	if len(errs.errs) > 0 {
		return nil, errors.Join(errs.errs...)
	}
	for name := range c.domains {
		c.names = append(c.names, name)
	}
	slices.Sort(c.names)
	return c, nil
}

func (c *Config) addFile(spec *fileSpec, o options, errs *errorList) {
	tree, exists := c.domains[spec.domain]
	switch {
	case !exists:
		tree = &domainTree{root: newNode()}
		tree.root.statKey = spec.domain
		c.domains[spec.domain] = tree
	case !o.mergeDomains:
		errs.add(spec.name, spec.domainNode.Line, "domain",
			"duplicate domain %q (also in %s); set MERGE_DOMAIN_CONFIG=true to merge", spec.domain, strings.Join(tree.files, ", "))
		return
	}
	tree.files = append(tree.files, spec.name)
	b := builder{file: spec.name, domain: spec.domain, errs: errs, calendarMonths: o.calendarMonths, storeError: o.storeError}
	b.insert(tree.root, spec.descriptors)
}

// builder inserts one file's descriptors into a domain's tree.
type builder struct {
	file           string
	domain         string
	errs           *errorList
	calendarMonths bool
	storeError     StoreErrorAction
}

func (b builder) insert(parent *node, specs []*descSpec) {
	for _, d := range specs {
		if d.invalid {
			continue // already reported; nothing to index it by
		}
		statKey, kind, ok := b.place(parent, d)
		if !ok {
			continue
		}
		source := fmt.Sprintf("%s:%d", b.file, d.line)
		n := newNode()
		n.statKey = statKey
		n.source = source
		lv := level{key: d.key, value: d.value, kind: kind, shared: d.shareThreshold, valueToMetric: d.valueToMetric}
		if d.regex != nil {
			lv.value = d.regex.pattern
		}
		n.path = append(slices.Clip(parent.path), lv)
		rules := d.limits
		if d.rule != nil {
			rules = []*Rule{d.rule}
		}
		for i, r := range rules {
			if !b.calendar(r, d.line, d.lease) {
				continue
			}
			r.Domain = b.domain
			r.StatKey = statKey
			r.ShadowMode = d.shadowMode
			r.DetailedMetric = d.detailedMetric
			r.ValueToMetric = d.valueToMetric
			r.ShareThreshold = d.shareThreshold
			r.QuotaMode = d.quotaMode
			r.Lease = d.lease
			r.Metadata = d.metadata
			r.Source = source
			r.Index = i
			r.limits = rules
			r.path = n.path
			r.key = newKeyParts(r)
			r.slot = new(observerSlot)
			if !r.storeErrorSet && !r.Unlimited {
				r.OnStoreError = b.storeError
			}
		}
		if len(rules) > 0 {
			n.rule = rules[0]
		}
		if d.regex != nil {
			parent.addRegex(d.key, d.regex, n)
		} else {
			parent.add(d.key, d.value, n)
		}
		b.insert(n, d.children)
	}
}

// place names d's node (envoyproxy's stats key; a value_regex node is
// key=~pattern, which no key_value can spell unless its key ends in '=')
// and says how requests reach it. It reports a sibling with the same key
// and value, or the same key and value_regex text, as a duplicate.
func (b builder) place(parent *node, d *descSpec) (string, levelKind, bool) {
	if d.regex != nil {
		if prev := parent.lookupRegex(d.key, d.regex.pattern); prev != nil {
			b.errs.add(b.file, d.regexLine, yamldoc.Join(d.field, "value_regex"),
				"duplicate value_regex %q for key %q (first at %s)", d.regex.pattern, d.key, prev.source)
			return "", 0, false
		}
		return parent.statKey + "." + d.key + "=~" + d.regex.pattern, byRegex, true
	}
	segment, kind := d.key, byKey
	switch {
	case strings.Contains(d.value, "*"):
		kind = byWildcard
	case d.value != "":
		kind = byValue
	}
	if d.value != "" {
		segment += "_" + d.value
	}
	statKey := parent.statKey + "." + segment
	if prev := parent.lookup(d.key, d.value); prev != nil {
		b.errs.add(b.file, d.line, d.field, "duplicate descriptor composite key %q (first at %s)", statKey, prev.source)
		return "", 0, false
	}
	return statKey, kind, true
}

// HasDomain reports whether any file configures domain.
func (c *Config) HasDomain(domain string) bool {
	if c == nil {
		return false
	}
	_, ok := c.domains[domain]
	return ok
}

// Domains lists the configured domains, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.names)
}

// Match finds the rule for one request descriptor as envoyproxy does: walk
// the entries from the domain's root, at each level taking the key_value
// node, else the first matching wildcard, else (our extension) the first
// matching value_regex, else the key-only node, never backtracking. The
// rule applies only at the node reached by the last entry. It returns nil
// for an unknown domain, no match, or a node without a rate_limit. Match
// does not allocate; the Rule is shared by every caller and must not be
// modified.
func (c *Config) Match(domain string, entries []Entry) *Rule {
	if c == nil || len(entries) == 0 {
		return nil
	}
	tree := c.domains[domain]
	if tree == nil {
		return nil
	}
	n := tree.root
	for _, e := range entries {
		if n = n.child(e); n == nil {
			return nil
		}
	}
	return n.rule
}

// calendar makes r's windows calendar months when WithCalendarMonths asks
// for it and r is a window rule with unit month. It reports a limit too
// long for calendar months (at 31 days each), or lease: true on one that
// then cannot lease (checkLease saw it before it was a calendar limit),
// and returns false.
func (b builder) calendar(r *Rule, line int, lease Lease) bool {
	if !b.calendarMonths || r.Unit != rlsv3.RateLimitResponse_RateLimit_MONTH || !r.Limit.Algorithm.Info().Calendar {
		return true
	}
	r.Limit.Calendar = true
	if err := r.Limit.Validate(); err != nil {
		b.errs.add(b.file, line, "rate_limit", "USE_CALENDAR_MONTH_RATE_LIMIT: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
		return false
	}
	if refused := leaseRefusal(r.Limit); lease == LeaseOn && refused != nil {
		b.errs.add(b.file, line, "lease", "USE_CALENDAR_MONTH_RATE_LIMIT: %s (set lease: false or change the limit)", refused.reason)
		return false
	}
	return true
}
