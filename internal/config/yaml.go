package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
)

// reader walks one file's YAML nodes by hand, rather than unmarshalling into
// structs, so that every error can name the line and the field's path and so
// that one bad field does not hide the others.
type reader struct {
	file string
	errs *errorList
	// depth and visits bound the walk: YAML aliases can point at their own
	// ancestors (a cycle) or fan out exponentially (an alias bomb).
	depth, visits int
	aborted       bool
}

const (
	maxDepth  = 100
	maxVisits = 1 << 19 // about 100k descriptors with their rate_limit blocks
)

// enter guards one level of the walk; every true must be paired with leave.
func (r *reader) enter(n *yaml.Node, field string) bool {
	if r.aborted {
		return false
	}
	r.visits++
	if r.depth >= maxDepth || r.visits > maxVisits {
		r.aborted = true
		r.errorf(n, field, "nesting too deep or too many nodes (a recursive or exploding alias?)")
		return false
	}
	r.depth++
	return true
}

func (r *reader) leave() { r.depth-- }

func (r *reader) errorf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	r.errs.add(r.file, line, field, format, args...)
}

// document parses data and returns its single top-level node, or nil for an
// empty document (reported by the caller as a missing domain).
func (r *reader) document(data []byte) (*yaml.Node, bool) {
	if line, col, bad := yamldoc.InvalidUTF8(data); bad {
		r.errs.add(r.file, line, "", "invalid YAML: not UTF-8 (byte at column %d)", col)
		return nil, false
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		line, msg := yamldoc.SyntaxError(data, err)
		r.errs.add(r.file, line, "", "invalid YAML: %s", msg)
		return nil, false
	}
	// A second document would be silently ignored by envoyproxy; refuse it
	// rather than load half of what the operator wrote.
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		line, msg := yamldoc.SyntaxError(data, err)
		r.errs.add(r.file, line, "", "invalid YAML: %s", msg)
		return nil, false
	case len(next.Content) > 0 && next.Content[0].ShortTag() != "!!null":
		r.errorf(&next, "", "more than one YAML document; put each domain in its own file")
		return nil, false
	}
	if len(doc.Content) == 0 || isNull(resolve(doc.Content[0])) {
		return nil, true
	}
	return resolve(doc.Content[0]), true
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// kindName names a node's kind for "want X, got Y" messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("string %q", n.Value)
		case "!!null":
			return "null"
		default:
			return fmt.Sprintf("%s %s", strings.TrimPrefix(n.ShortTag(), "!!"), n.Value)
		}
	default:
		return "an unsupported node"
	}
}

type pair struct {
	name     string
	key, val *yaml.Node
}

// fields returns a mapping's key/value pairs with YAML merge keys (<<)
// expanded, explicit keys winning over merged ones as YAML specifies. It
// reports unknown and repeated keys. ok is false when n is not a mapping.
func (r *reader) fields(n *yaml.Node, field string, allowed ...string) ([]pair, bool) {
	n = resolve(n)
	if !r.enter(n, field) {
		return nil, false
	}
	defer r.leave()
	if n.Kind != yaml.MappingNode {
		r.errorf(n, field, "want a mapping, got %s", kindName(n))
		return nil, false
	}
	var out []pair
	seen := map[string]*yaml.Node{}
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, r.mergeSource(v, field, allowed)...)
			continue
		}
		name := k.Value
		sub := yamldoc.Join(field, name)
		if k.Kind != yaml.ScalarNode {
			r.errorf(k, field, "keys must be strings, got %s", kindName(k))
			continue
		}
		if !slices.Contains(allowed, name) {
			r.errorf(k, sub, "unknown key %q (want one of %s)", name, strings.Join(allowed, ", "))
			continue
		}
		if first, dup := seen[name]; dup {
			r.errorf(k, sub, "repeated key (first at line %d)", first.Line)
			continue
		}
		seen[name] = k
		out = append(out, pair{name: name, key: k, val: resolve(v)})
	}
	for _, p := range merged {
		if _, dup := seen[p.name]; !dup {
			seen[p.name] = p.key
			out = append(out, p)
		}
	}
	return out, true
}

func (r *reader) mergeSource(v *yaml.Node, field string, allowed []string) []pair {
	v = resolve(v)
	if !r.enter(v, field) {
		return nil
	}
	defer r.leave()
	if v.Kind == yaml.SequenceNode {
		var out []pair
		for _, m := range v.Content {
			out = append(out, r.mergeSource(m, field, allowed)...)
		}
		return out
	}
	ps, _ := r.fields(v, field, allowed...)
	return ps
}

// str reads a scalar as text. Like envoyproxy (yaml.v2 into a string
// field), any scalar is accepted verbatim, so `value: 500` is "500".
func (r *reader) str(n *yaml.Node, field string) (string, bool) {
	if isNull(n) {
		return "", true
	}
	if n.Kind != yaml.ScalarNode {
		r.errorf(n, field, "want a string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

// boolean accepts YAML booleans and, like yaml.v2, the YAML 1.1 forms
// yes/no/on/off when unquoted.
func (r *reader) boolean(n *yaml.Node, field string) (bool, bool) {
	if isNull(n) {
		return false, true
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!bool":
			b, err := strconv.ParseBool(strings.ToLower(n.Value))
			if err == nil {
				return b, true
			}
		case "!!str":
			if n.Style == 0 {
				switch strings.ToLower(n.Value) {
				case "yes", "on", "y":
					return true, true
				case "no", "off", "n":
					return false, true
				}
			}
		}
	}
	r.errorf(n, field, "want true or false, got %s", kindName(n))
	return false, false
}

// uint reads a non-negative integer no larger than limit. Quoted numbers are
// refused, as envoyproxy refuses them.
func (r *reader) uint(n *yaml.Node, field string, limit uint64) (uint64, bool) {
	if isNull(n) {
		return 0, true
	}
	var v uint64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		r.errorf(n, field, "want a whole number from 0 to %d, got %s", limit, kindName(n))
		return 0, false
	}
	if v > limit {
		r.errorf(n, field, "%d is larger than %d", v, limit)
		return 0, false
	}
	return v, true
}

func (r *reader) duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := r.str(n, field)
	if !ok || s == "" {
		return 0, ok
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		r.errorf(n, field, "want a duration like \"100ms\" or \"1s\", got %s", kindName(n))
		return 0, false
	}
	if d < 0 {
		r.errorf(n, field, "must not be negative, got %s", d)
		return 0, false
	}
	return d, true
}

func (r *reader) list(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		r.errorf(n, field, "want a list, got %s", kindName(n))
		return nil, false
	}
	if !r.enter(n, field) {
		return nil, false
	}
	defer r.leave()
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = resolve(c)
	}
	return out, true
}
