package middleware

import (
	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
	"github.com/ratelimitd/ratelimitd/pkg/client"
)

// actionNames are the actions a routes file knows: Envoy's first, then
// ratelimitd's.
var actionNames = []string{"remote_address", "request_headers", "generic_key", "path", "method", "user"}

// action reads one action: a mapping of exactly one action name to its
// fields ({} or nothing where it has none).
func (r *fileReader) action(n *yaml.Node, field string) (client.Action, bool) {
	ps := r.fields(n, field, actionNames...)
	if len(ps) != 1 {
		if n.Kind == yaml.MappingNode && len(n.Content) != 2 {
			r.errorf(n, field, "want exactly one action (one of remote_address, request_headers, generic_key, path, method, user), got %d keys", len(n.Content)/2)
		}
		return client.Action{}, false
	}
	p := ps[0]
	sub := yamldoc.Join(field, p.name)
	switch p.name {
	case "remote_address":
		r.args(p.val, sub)
		return client.RemoteAddress(), true
	case "request_headers":
		a := r.args(p.val, sub, "header_name", "descriptor_key", "skip_if_absent")
		header, key := r.required(a, p.key, sub, "header_name"), r.required(a, p.key, sub, "descriptor_key")
		skip := false
		if v, ok := a["skip_if_absent"]; ok {
			skip = r.boolean(v, yamldoc.Join(sub, "skip_if_absent"))
		}
		return client.RequestHeader(header, key, skip), true
	case "generic_key":
		a := r.args(p.val, sub, "descriptor_key", "descriptor_value")
		value := r.required(a, p.key, sub, "descriptor_value")
		return client.GenericKey(r.optional(a, sub, "descriptor_key"), value), true
	}
	key := r.optional(r.args(p.val, sub, "descriptor_key"), sub, "descriptor_key")
	switch p.name {
	case "path":
		return client.Path(key), true
	case "method":
		return client.Method(key), true
	default:
		return client.User(key), true
	}
}

// args is an action's fields by name; nothing (null) is no fields.
func (r *fileReader) args(n *yaml.Node, field string, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return out
	}
	for _, p := range r.fields(n, field, allowed...) {
		out[p.name] = p.val
	}
	return out
}

func (r *fileReader) required(a map[string]*yaml.Node, at *yaml.Node, field, name string) string {
	v, ok := a[name]
	if !ok {
		r.errorf(at, yamldoc.Join(field, name), "missing")
		return ""
	}
	return r.str(v, yamldoc.Join(field, name))
}

func (r *fileReader) optional(a map[string]*yaml.Node, field, name string) string {
	v, ok := a[name]
	if !ok {
		return ""
	}
	return r.str(v, yamldoc.Join(field, name))
}
