package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/ratelimitd/ratelimitd/pkg/client"
)

// flat writes descriptors as key=value lists, for comparing.
func flat(descs []*ratelimitv3.RateLimitDescriptor) [][]string {
	out := [][]string{}
	for _, d := range descs {
		var es []string
		for _, e := range d.GetEntries() {
			es = append(es, e.GetKey()+"="+e.GetValue())
		}
		out = append(out, es)
	}
	return out
}

func limits(actions ...[]client.Action) []client.RateLimit {
	out := make([]client.RateLimit, len(actions))
	for i, a := range actions {
		out[i] = client.RateLimit{Actions: a}
	}
	return out
}

func acts(a ...client.Action) []client.Action { return a }

type tenantKey struct{}

func tenant(ctx context.Context) (string, bool) {
	v, ok := ctx.Value(tenantKey{}).(string)
	return v, ok
}

func TestBuilderHTTP(t *testing.T) {
	remote := limits(acts(client.RemoteAddress()))
	cases := []struct {
		name   string
		peer   string
		xff    []string
		hops   int
		header map[string][]string
		url    string
		user   string
		limits []client.RateLimit
		want   [][]string
	}{
		{name: "peer, X-Forwarded-For ignored without trusted hops", peer: "192.0.2.7:5555", xff: []string{"203.0.113.1"},
			limits: remote, want: [][]string{{"remote_address=192.0.2.7"}}},
		{name: "one trusted hop: the rightmost address", peer: "10.0.0.2:1", xff: []string{"198.51.100.1, 203.0.113.1"}, hops: 1,
			limits: remote, want: [][]string{{"remote_address=203.0.113.1"}}},
		{name: "two trusted hops", peer: "10.0.0.2:1", xff: []string{"198.51.100.1, 203.0.113.1"}, hops: 2,
			limits: remote, want: [][]string{{"remote_address=198.51.100.1"}}},
		{name: "two hops over two field lines", peer: "10.0.0.2:1", xff: []string{"198.51.100.1", "203.0.113.1"}, hops: 2,
			limits: remote, want: [][]string{{"remote_address=198.51.100.1"}}},
		{name: "fewer addresses than hops: the peer", peer: "10.0.0.2:1", xff: []string{"198.51.100.1, 203.0.113.1"}, hops: 3,
			limits: remote, want: [][]string{{"remote_address=10.0.0.2"}}},
		{name: "not an IP: the peer", peer: "10.0.0.2:1", xff: []string{"unknown"}, hops: 1,
			limits: remote, want: [][]string{{"remote_address=10.0.0.2"}}},
		{name: "IPv6 peer", peer: "[2001:db8::1]:443", limits: remote, want: [][]string{{"remote_address=2001:db8::1"}}},
		{name: "IPv4-mapped peer", peer: "[::ffff:192.0.2.7]:443", limits: remote, want: [][]string{{"remote_address=192.0.2.7"}}},
		{name: "no IP peer: no descriptor", peer: "@", limits: remote, want: [][]string{}},
		{name: "header: its first value", header: map[string][]string{"X-Api-Key": {"k1", "k2"}},
			limits: limits(acts(client.RequestHeader("x-api-key", "api_key", false))), want: [][]string{{"api_key=k1"}}},
		{name: "header absent: no descriptor from that rate limit only",
			limits: limits(acts(client.RequestHeader("x-api-key", "api_key", false), client.GenericKey("", "a")), acts(client.GenericKey("k", "b"))),
			want:   [][]string{{"k=b"}}},
		{name: "header absent, skip_if_absent: the entry is left out",
			limits: limits(acts(client.RequestHeader("x-api-key", "api_key", true), client.GenericKey("", "a"))),
			want:   [][]string{{"generic_key=a"}}},
		{name: "every entry skipped: no descriptor",
			limits: limits(acts(client.RequestHeader("x-api-key", "api_key", true))), want: [][]string{}},
		{name: "pseudo-headers", url: "http://example.com/a/b?q=1",
			limits: limits(acts(client.RequestHeader(":path", "p", false), client.RequestHeader(":method", "m", false),
				client.RequestHeader(":authority", "h", false), client.RequestHeader(":scheme", "s", false))),
			want: [][]string{{"p=/a/b?q=1", "m=GET", "h=example.com", "s=http"}}},
		{name: "path without the query, method", url: "http://example.com/a/b?q=1",
			limits: limits(acts(client.Path(""), client.Method("verb"))), want: [][]string{{"path=/a/b", "verb=GET"}}},
		{name: "user and a context value", user: "alice",
			limits: limits(acts(client.User(""), client.FromContext("tenant", tenant))), want: [][]string{{"user=alice", "tenant=acme"}}},
		{name: "no user: no descriptor",
			limits: limits(acts(client.User("")), acts(client.Path(""))), want: [][]string{{"path=/"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url
			if url == "" {
				url = "http://example.com/"
			}
			r := httptest.NewRequest(http.MethodGet, url, nil)
			r.RemoteAddr = "192.0.2.1:1"
			if tc.peer != "" {
				r.RemoteAddr = tc.peer
			}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for k, vs := range tc.header {
				r.Header[k] = vs
			}
			ctx := context.WithValue(r.Context(), tenantKey{}, "acme")
			if tc.user != "" {
				ctx = client.WithUser(ctx, tc.user)
			}
			got := flat(client.Builder{TrustedHops: tc.hops}.HTTP(r.WithContext(ctx), tc.limits))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBuilderGRPC(t *testing.T) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 5555}})
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("x-api-key", "k1", "x-forwarded-for", "198.51.100.1, 203.0.113.1", ":authority", "rl.example"))
	ctx = client.WithUser(ctx, "alice")
	const method = "/echo.v1.Echo/Say"
	cases := []struct {
		name   string
		ctx    context.Context
		hops   int
		limits []client.RateLimit
		want   [][]string
	}{
		{name: "peer", ctx: ctx, limits: limits(acts(client.RemoteAddress())), want: [][]string{{"remote_address=192.0.2.7"}}},
		{name: "trusted hop", ctx: ctx, hops: 1, limits: limits(acts(client.RemoteAddress())), want: [][]string{{"remote_address=203.0.113.1"}}},
		{name: "no peer", ctx: context.Background(), limits: limits(acts(client.RemoteAddress())), want: [][]string{}},
		{name: "path and method", ctx: ctx, limits: limits(acts(client.Path(""), client.Method(""))),
			want: [][]string{{"path=/echo.v1.Echo/Say", "method=POST"}}},
		{name: "metadata and pseudo-headers", ctx: ctx,
			limits: limits(acts(client.RequestHeader("X-Api-Key", "k", false), client.RequestHeader(":path", "p", false), client.RequestHeader(":authority", "a", false))),
			want:   [][]string{{"k=k1", "p=/echo.v1.Echo/Say", "a=rl.example"}}},
		{name: "absent metadata", ctx: ctx, limits: limits(acts(client.RequestHeader("x-other", "k", false))), want: [][]string{}},
		{name: "user", ctx: ctx, limits: limits(acts(client.User("uid"))), want: [][]string{{"uid=alice"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := flat(client.Builder{TrustedHops: tc.hops}.GRPC(tc.ctx, method, tc.limits))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestActionValidate(t *testing.T) {
	bad := map[string]client.Action{
		"zero":             {},
		"empty key":        client.FromContext("", tenant),
		"no header name":   client.RequestHeader("", "k", false),
		"nil function":     client.FromContext("k", nil),
		"empty header key": client.RequestHeader("x", "", false),
	}
	for name, a := range bad {
		if a.Validate() == nil {
			t.Errorf("%s: valid", name)
		}
	}
	if err := (client.RateLimit{}).Validate(); err == nil {
		t.Error("a RateLimit without actions is valid")
	}
	for _, a := range []client.Action{client.RemoteAddress(), client.GenericKey("", "v"), client.Path(""), client.Method(""), client.User(""), client.RequestHeader("x", "k", true)} {
		if err := a.Validate(); err != nil {
			t.Errorf("%s: %v", a.Key(), err)
		}
	}
}
