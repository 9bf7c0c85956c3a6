package config

import (
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
)

// metadata reads a mapping of JSON-like values (the only values a response's
// protobuf Struct can carry).
func (r *reader) metadata(n *yaml.Node, field string) (map[string]any, bool) {
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		r.errorf(n, field, "want a mapping, got %s", kindName(n))
		return nil, false
	}
	v, ok := r.jsonValue(n, field)
	if !ok {
		return nil, false
	}
	m, _ := v.(map[string]any)
	return m, true
}

func (r *reader) jsonValue(n *yaml.Node, field string) (any, bool) {
	n = resolve(n)
	if !r.enter(n, field) {
		return nil, false
	}
	defer r.leave()
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := resolve(n.Content[i]), n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				r.errorf(k, field, "metadata keys must be strings, got %s", kindName(k))
				ok = false
				continue
			}
			sub := yamldoc.Join(field, k.Value)
			if _, dup := m[k.Value]; dup {
				r.errorf(k, sub, "repeated key")
				ok = false
				continue
			}
			val, vok := r.jsonValue(v, sub)
			ok = ok && vok
			m[k.Value] = val
		}
		return m, ok
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		ok := true
		for i, c := range n.Content {
			val, vok := r.jsonValue(c, fmt.Sprintf("%s[%d]", field, i))
			ok = ok && vok
			l[i] = val
		}
		return l, ok
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				r.errorf(n, field, "unreadable %s", kindName(n))
				return nil, false
			}
			return jsonNumber(v), true
		default:
			// Timestamps and binary stay text: a Struct has no such types.
			return n.Value, true
		}
	default:
		r.errorf(n, field, "unsupported YAML node")
		return nil, false
	}
}

// jsonNumber turns integers into float64 like encoding/json and
// structpb do, so metadata compares the same however it was written.
func jsonNumber(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return fmt.Sprint(x)
		}
		return x
	default:
		return v
	}
}
