package client

import (
	"context"
	"fmt"
)

type actionKind uint8

const (
	actRemoteAddress actionKind = iota + 1
	actRequestHeader
	actGenericKey
	actPath
	actMethod
	actUser
	actContext
)

// Action adds one entry to a descriptor, as an action of Envoy's route
// rate_limits does. The zero Action is invalid; make one with the functions
// below.
type Action struct {
	kind actionKind
	// key is the entry's key.
	key string
	// arg is request_headers' header name, generic_key's value.
	arg string
	// skip is request_headers' skip_if_absent.
	skip  bool
	value func(context.Context) (string, bool)
}

// RemoteAddress adds ("remote_address", the client's IP), as Envoy's
// remote_address action: the connection's peer, or with Builder.TrustedHops
// the address that many trusted proxies put in X-Forwarded-For. A request
// without an IP peer (a Unix socket) gets no descriptor from this RateLimit.
func RemoteAddress() Action { return Action{kind: actRemoteAddress, key: "remote_address"} }

// RequestHeader adds (descriptorKey, the header's first value), as Envoy's
// request_headers action. The pseudo-headers :path (path and query),
// :method, :authority and :scheme name the request line; over gRPC, :path
// is the full method and other names are metadata keys. When the header is
// absent the RateLimit gives no descriptor, unless skipIfAbsent, which only
// leaves this entry out.
func RequestHeader(header, descriptorKey string, skipIfAbsent bool) Action {
	return Action{kind: actRequestHeader, key: descriptorKey, arg: header, skip: skipIfAbsent}
}

// GenericKey adds (descriptorKey, value), as Envoy's generic_key action;
// descriptorKey "" is Envoy's default, "generic_key".
func GenericKey(descriptorKey, value string) Action {
	if descriptorKey == "" {
		descriptorKey = "generic_key"
	}
	return Action{kind: actGenericKey, key: descriptorKey, arg: value}
}

// Path adds (descriptorKey, the URL path without the query), "path" when
// descriptorKey is ""; over gRPC the value is the full method
// ("/pkg.Service/Method"). Unlike :path, a query string cannot make a new
// counter.
func Path(descriptorKey string) Action {
	return Action{kind: actPath, key: orDefault(descriptorKey, "path")}
}

// Method adds (descriptorKey, the HTTP method), "method" when descriptorKey
// is ""; over gRPC the value is "POST".
func Method(descriptorKey string) Action {
	return Action{kind: actMethod, key: orDefault(descriptorKey, "method")}
}

// User adds (descriptorKey, the user id WithUser put in the request's
// context), "user" when descriptorKey is "". A request without one gets no
// descriptor from this RateLimit: the authentication in front of the
// limiter sets it.
func User(descriptorKey string) Action {
	return Action{kind: actUser, key: orDefault(descriptorKey, "user")}
}

// FromContext adds (descriptorKey, value(ctx)) for any value the program
// keeps in the request's context (a tenant, a plan); when value reports
// false the RateLimit gives no descriptor.
func FromContext(descriptorKey string, value func(context.Context) (string, bool)) Action {
	return Action{kind: actContext, key: descriptorKey, value: value}
}

// Key is the key of the entry the action adds.
func (a Action) Key() string { return a.key }

// Validate reports an Action that cannot add an entry: the zero Action, an
// empty key or header name, a FromContext without a function.
func (a Action) Validate() error {
	switch {
	case a.kind == 0:
		return fmt.Errorf("the zero Action; make one with RemoteAddress, RequestHeader, GenericKey, Path, Method, User or FromContext")
	case a.key == "":
		return fmt.Errorf("empty descriptor key")
	case a.kind == actRequestHeader && a.arg == "":
		return fmt.Errorf("request_headers: empty header name")
	case a.kind == actContext && a.value == nil:
		return fmt.Errorf("FromContext %q: nil function", a.key)
	}
	return nil
}

// RateLimit is one entry of Envoy's route rate_limits: its actions, in
// order, make one descriptor. If an action cannot add its entry (a header
// or the user is missing), the request gets no descriptor from it, as in
// Envoy.
type RateLimit struct {
	Actions []Action
}

// Validate reports a RateLimit without actions or with an invalid one.
func (rl RateLimit) Validate() error {
	if len(rl.Actions) == 0 {
		return fmt.Errorf("no actions")
	}
	for i, a := range rl.Actions {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("actions[%d]: %w", i, err)
		}
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
