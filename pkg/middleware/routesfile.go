package middleware

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
	"github.com/ratelimitd/ratelimitd/pkg/client"
)

// Load reads a routes file (docs/go.md, "Routes file"); see Parse.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("middleware: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a routes file: the rules' domain, and http and grpc routes
// whose rate_limits are Envoy's route rate_limits (actions remote_address,
// request_headers, generic_key) plus path, method and user. It is strict:
// an unknown key, a wrong type, a missing field or a route New would refuse
// is an error naming name:line and the field, and every error of the file
// is returned, joined.
func Parse(name string, data []byte) (Config, error) {
	r := &fileReader{file: name}
	cfg := r.document(data)
	if len(r.errs) == 0 {
		// What only compiling finds: ServeMux's verdict on the patterns,
		// repeated gRPC methods.
		if _, err := compile(cfg); err != nil {
			return Config{}, err
		}
	}
	if err := errors.Join(r.errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

type fileReader struct {
	file string
	errs []error
}

func (r *fileReader) errorf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	r.errs = append(r.errs, &Error{File: r.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// syntax reports a YAML syntax error of data on the line it is on.
func (r *fileReader) syntax(data []byte, err error) {
	line, msg := yamldoc.SyntaxError(data, err)
	r.errs = append(r.errs, &Error{File: r.file, Line: line, Msg: "invalid YAML: " + msg})
}

func (r *fileReader) document(data []byte) Config {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			r.errs = append(r.errs, &Error{File: r.file, Field: "domain", Msg: "empty file; want domain and routes"})
		} else {
			r.syntax(data, err)
		}
		return Config{}
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		r.errorf(&next, "", "more than one YAML document")
	} else if !errors.Is(err, io.EOF) {
		r.syntax(data, err)
	}
	var cfg Config
	sawDomain := false
	for _, p := range r.fields(doc.Content[0], "", "domain", "http", "grpc") {
		switch p.name {
		case "domain":
			cfg.Domain, sawDomain = r.str(p.val, "domain"), true
		case "http":
			cfg.HTTP = r.routes(p.val, "http", "pattern")
		case "grpc":
			cfg.GRPC = r.routes(p.val, "grpc", "method")
		}
	}
	if !sawDomain && doc.Content[0].Kind == yaml.MappingNode {
		r.errorf(doc.Content[0], "domain", "missing; name the rules' domain")
	}
	return cfg
}

type pair struct {
	name     string
	key, val *yaml.Node
}

// fields is a mapping's pairs, each error reported: not a mapping, an
// alias or merge key (not supported, to keep the file plain), an unknown
// or repeated key.
func (r *fileReader) fields(n *yaml.Node, field string, allowed ...string) []pair {
	if !r.plain(n, field) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		r.errorf(n, field, "want a mapping, got %s", kindName(n))
		return nil
	}
	var out []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		sub := yamldoc.Join(field, k.Value)
		switch {
		case len(allowed) == 0:
			r.errorf(k, sub, "unknown key %q (%s takes no fields)", k.Value, field[strings.LastIndexByte(field, '.')+1:])
		case !slices.Contains(allowed, k.Value):
			r.errorf(k, sub, "unknown key %q (want one of %s)", k.Value, strings.Join(allowed, ", "))
		case seen[k.Value] > 0:
			r.errorf(k, sub, "repeated key (first at line %d)", seen[k.Value])
		default:
			seen[k.Value] = k.Line
			out = append(out, pair{name: k.Value, key: k, val: v})
		}
	}
	return out
}

func (r *fileReader) plain(n *yaml.Node, field string) bool {
	if n.Kind == yaml.AliasNode {
		r.errorf(n, field, "YAML aliases are not supported in a routes file")
		return false
	}
	return true
}

func (r *fileReader) list(n *yaml.Node, field string) []*yaml.Node {
	if !r.plain(n, field) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		r.errorf(n, field, "want a list, got %s", kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		r.errorf(n, field, "empty list")
	}
	return n.Content
}

func (r *fileReader) str(n *yaml.Node, field string) string {
	if !r.plain(n, field) {
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		r.errorf(n, field, "want a string, got %s", kindName(n))
		return ""
	}
	if n.Value == "" {
		r.errorf(n, field, "empty")
	}
	return n.Value
}

func (r *fileReader) boolean(n *yaml.Node, field string) bool {
	if !r.plain(n, field) {
		return false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		r.errorf(n, field, "want true or false, got %s", kindName(n))
		return false
	}
	v, _ := strconv.ParseBool(n.Value)
	return v
}

func (r *fileReader) routes(n *yaml.Node, field, patternKey string) []Route {
	var out []Route
	for i, item := range r.list(n, field) {
		sub := fmt.Sprintf("%s[%d]", field, i)
		rt := Route{file: r.file, line: item.Line}
		var sawPattern, sawLimits bool
		for _, p := range r.fields(item, sub, patternKey, "rate_limits") {
			if p.name == patternKey {
				rt.Pattern, sawPattern = r.str(p.val, yamldoc.Join(sub, patternKey)), true
				continue
			}
			sawLimits = true
			for j, rl := range r.list(p.val, yamldoc.Join(sub, "rate_limits")) {
				rt.RateLimits = append(rt.RateLimits, r.rateLimit(rl, fmt.Sprintf("%s.rate_limits[%d]", sub, j)))
			}
		}
		if !sawPattern {
			r.errorf(item, yamldoc.Join(sub, patternKey), "missing")
		}
		if !sawLimits {
			r.errorf(item, yamldoc.Join(sub, "rate_limits"), "missing")
		}
		out = append(out, rt)
	}
	return out
}

func (r *fileReader) rateLimit(n *yaml.Node, field string) client.RateLimit {
	var rl client.RateLimit
	ps := r.fields(n, field, "actions")
	if len(ps) == 0 && n.Kind == yaml.MappingNode {
		r.errorf(n, yamldoc.Join(field, "actions"), "missing")
	}
	for _, p := range ps {
		for i, a := range r.list(p.val, yamldoc.Join(field, "actions")) {
			if act, ok := r.action(a, fmt.Sprintf("%s.actions[%d]", field, i)); ok {
				rl.Actions = append(rl.Actions, act)
			}
		}
	}
	return rl
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%s %q", strings.TrimPrefix(n.ShortTag(), "!!"), n.Value)
	case yaml.AliasNode:
		return "an alias"
	default:
		return "an unsupported node"
	}
}
