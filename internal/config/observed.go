package config

import "sync/atomic"

// observerSlot is where an observer keeps what it derived from a rule (its
// stat counters), so that it is built once per rule instead of once per
// request. It is a pointer of its own so that copying a Rule (as tests do)
// copies no atomic value.
type observerSlot struct{ v atomic.Value }

// Observed returns what SetObserved stored for the rule, or nil (always nil
// for rules not built by Parse, such as request overrides).
func (r *Rule) Observed() any {
	if r.slot == nil {
		return nil
	}
	return r.slot.v.Load()
}

// SetObserved stores v for the rule unless a value is already there, and
// returns the value in force. Every value stored for one rule must have the
// same concrete type. A rule without a slot keeps nothing and returns v.
func (r *Rule) SetObserved(v any) any {
	if r.slot == nil {
		return v
	}
	if r.slot.v.CompareAndSwap(nil, v) {
		return v
	}
	return r.slot.v.Load()
}

// MetricKeyVaries reports whether the rule's stats key depends on the
// request (detailed_metric, value_to_metric on its path, or a request's own
// limit, whose key is its entries): an observer must then key its counters
// by MetricKey, not by the rule.
func (r *Rule) MetricKeyVaries() bool {
	if r.DetailedMetric || r.FromRequest() {
		return true
	}
	for _, l := range r.path {
		if l.valueToMetric {
			return true
		}
	}
	return false
}

// FromRequest reports a rule made for one request (a descriptor's own
// limit, see OverrideRule), whose stats key is the request's entries.
func (r *Rule) FromRequest() bool { return r.path == nil }

// EachRule calls fn for every limit of every rule in force, domains sorted,
// descriptors in config order: what the config would Dump.
func (c *Config) EachRule(fn func(*Rule)) {
	if c == nil {
		return
	}
	for _, name := range c.names {
		eachRule(c.domains[name].root, fn)
	}
}

func eachRule(n *node, fn func(*Rule)) {
	if n.rule != nil {
		for _, r := range n.rule.Limits() {
			fn(r)
		}
	}
	for _, c := range n.children {
		eachRule(c, fn)
	}
}
