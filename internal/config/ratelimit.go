package config

import (
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// rateLimitBlock is one rate_limit block while it is read and checked.
type rateLimitBlock struct {
	at    *yaml.Node // the rate_limit key: where block-wide errors point
	field string
	rule  *Rule
	keys  map[string]*yaml.Node // the block's keys by name
	valid bool

	unitName     string
	multiplier   uint64
	burst        uint64
	replaceNodes []*yaml.Node
}

// rateLimit reads a rate_limit block (or one item of rate_limits, whose
// allowed keys differ) into a Rule with its limit set, or reports why it
// cannot and returns nil. leaseKey is the descriptor's lease key when it
// says lease: true (nil otherwise): the limit must then be able to lease.
func (r *reader) rateLimit(at, n *yaml.Node, field string, allowed []string, leaseKey *yaml.Node) *Rule {
	pairs, ok := r.fields(n, field, allowed...)
	if !ok {
		return nil
	}
	b := &rateLimitBlock{at: at, field: field, rule: &Rule{}, keys: map[string]*yaml.Node{}, valid: true, multiplier: 1}
	for _, p := range pairs {
		b.keys[p.name] = p.key
		b.valid = r.rateLimitField(b, p) && b.valid
	}
	r.checkReplaces(b)
	if b.rule.Unlimited {
		r.checkUnlimited(b)
	} else {
		r.buildLimit(b)
	}
	r.checkLease(b, leaseKey)
	if !b.valid {
		return nil
	}
	return b.rule
}

func (r *reader) rateLimitField(b *rateLimitBlock, p pair) bool {
	sub := yamldoc.Join(b.field, p.name)
	rule := b.rule
	var ok bool
	switch p.name {
	case "unit":
		if b.unitName, ok = r.str(p.val, sub); ok && b.unitName != "" {
			if rule.Unit, ok = parseUnit(b.unitName); !ok {
				r.errorf(p.val, sub, "unknown unit %q (want second, minute, hour, day, week, month or year)", b.unitName)
			}
		}
	case "requests_per_unit":
		var v uint64
		v, ok = r.uint(p.val, sub, math.MaxUint32)
		rule.RequestsPerUnit = uint32(v)
	case "unlimited":
		rule.Unlimited, ok = r.boolean(p.val, sub)
	case "name":
		rule.Name, ok = r.str(p.val, sub)
	case "replaces":
		rule.Replaces, b.replaceNodes, ok = r.replaces(p.val, sub)
	case "algorithm":
		var name string
		if name, ok = r.str(p.val, sub); ok {
			var err error
			if rule.Limit.Algorithm, err = parseAlgorithm(name); err != nil {
				r.errorf(p.val, sub, "%v", err)
				ok = false
			}
		}
	case "burst":
		if b.burst, ok = r.uint(p.val, sub, algorithms.MaxCount); ok && b.burst == 0 {
			r.errorf(p.val, sub, "must be at least 1 (leave it out to default to requests_per_unit)")
			ok = false
		}
	case "unit_multiplier":
		if b.multiplier, ok = r.uint(p.val, sub, math.MaxUint32); ok && b.multiplier == 0 {
			r.errorf(p.val, sub, "must be at least 1")
			ok = false
		}
	case "refill_interval":
		rule.Limit.RefillInterval, ok = r.duration(p.val, sub)
	case "max_debt":
		rule.Limit.MaxDebt, ok = r.uint(p.val, sub, algorithms.MaxCount)
	case "on_store_error":
		var name string
		if name, ok = r.str(p.val, sub); ok {
			if rule.OnStoreError, ok = parseStoreErrorAction(name); !ok {
				r.errorf(p.val, sub, "want %s, got %s", storeErrorActions, kindName(p.val))
			}
			rule.storeErrorSet = true
		}
	}
	return ok
}

// checkReplaces runs after all fields are read: name may follow replaces.
func (r *reader) checkReplaces(b *rateLimitBlock) {
	for i, name := range b.rule.Replaces {
		if name == b.rule.Name {
			r.errorf(b.replaceNodes[i], fmt.Sprintf("%s.replaces[%d].name", b.field, i), "a rule cannot replace itself (%q)", name)
			b.valid = false
		}
	}
}

// checkUnlimited refuses what an unlimited rule would silently ignore (it
// never reaches the store, so on_store_error has nothing to decide); like
// envoyproxy it tolerates an empty unit.
func (r *reader) checkUnlimited(b *rateLimitBlock) {
	for _, k := range []string{"unit", "algorithm", "burst", "unit_multiplier", "refill_interval", "max_debt", "on_store_error"} {
		if key := b.keys[k]; key != nil && (k != "unit" || b.unitName != "") {
			r.errorf(key, yamldoc.Join(b.field, k), "must not be set when unlimited is true")
			b.valid = false
		}
	}
}

// buildLimit turns the block into the algorithms.Limit the store enforces.
func (r *reader) buildLimit(b *rateLimitBlock) {
	rule := b.rule
	if b.unitName == "" {
		where := b.at
		if key := b.keys["unit"]; key != nil {
			where = key
		}
		r.errorf(where, yamldoc.Join(b.field, "unit"), "missing (want second, minute, hour, day, week, month or year, or unlimited: true)")
		b.valid = false
	}
	if !b.valid {
		return
	}
	if rule.Limit.Algorithm == 0 {
		rule.Limit.Algorithm = algorithms.FixedWindow
	}
	if b.burst != 0 && !rule.Limit.Algorithm.Info().Bucket {
		// Validate words the refusal, naming the algorithms burst applies to.
		refused := algorithms.Limit{Algorithm: rule.Limit.Algorithm, Requests: 1, Period: time.Second, Burst: 1}.Validate()
		r.errorf(b.keys["burst"], yamldoc.Join(b.field, "burst"), "%s", strings.TrimPrefix(refused.Error(), "burst "))
		b.valid = false
		return
	}
	unit := UnitDuration(rule.Unit)
	if b.multiplier > uint64(algorithms.MaxPeriod/unit) {
		r.errorf(b.keys["unit_multiplier"], yamldoc.Join(b.field, "unit_multiplier"), "%d %s is longer than %s",
			b.multiplier, strings.ToLower(rule.Unit.String()), algorithms.MaxPeriod)
		b.valid = false
		return
	}
	rule.Limit.Requests = uint64(rule.RequestsPerUnit)
	rule.Limit.Period = time.Duration(b.multiplier) * unit
	rule.Limit.Burst = b.burst
	if err := rule.Limit.Validate(); err != nil {
		r.errorf(b.at, b.field, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
		b.valid = false
	}
}

// replaces returns the names and, for error messages, their nodes.
func (r *reader) replaces(n *yaml.Node, field string) ([]string, []*yaml.Node, bool) {
	items, ok := r.list(n, field)
	if !ok {
		return nil, nil, false
	}
	names := make([]string, 0, len(items))
	nodes := make([]*yaml.Node, 0, len(items))
	for i, item := range items {
		sub := fmt.Sprintf("%s[%d]", field, i)
		pairs, ok := r.fields(item, sub, "name")
		if !ok {
			return nil, nil, false
		}
		name, at := "", item
		for _, p := range pairs {
			at = p.val
			if name, ok = r.str(p.val, yamldoc.Join(sub, "name")); !ok {
				return nil, nil, false
			}
		}
		if name == "" {
			r.errorf(at, yamldoc.Join(sub, "name"), "missing or empty: replaces needs the name of another rule")
			return nil, nil, false
		}
		names = append(names, name)
		nodes = append(nodes, at)
	}
	return names, nodes, true
}
