package client

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Builder makes a request's descriptors from RateLimits, as Envoy's route
// rate_limits do. The zero Builder trusts no proxy.
type Builder struct {
	// TrustedHops is Envoy's xff_num_trusted_hops with use_remote_address:
	// with n > 0, RemoteAddress is the n-th address from the right of
	// X-Forwarded-For (the one the outermost of n trusted proxies saw),
	// falling back to the peer when the header has fewer addresses or that
	// one is not an IP. With 0 it is the peer, whatever the header says: a
	// client cannot choose its own counter.
	TrustedHops int
}

// source is what actions read; httpSource and grpcSource are the two.
type source interface {
	context() context.Context
	header(name string) (string, bool)
	path() string
	method() string
	remoteAddress(trustedHops int) (string, bool)
}

// HTTP builds r's descriptors: one per RateLimit whose actions all add
// their entry, in order.
func (b Builder) HTTP(r *http.Request, limits []RateLimit) []*ratelimitv3.RateLimitDescriptor {
	return b.build(httpSource{r}, limits)
}

// GRPC builds the descriptors of a call of fullMethod with ctx, the server
// handler's context (its peer and incoming metadata).
func (b Builder) GRPC(ctx context.Context, fullMethod string, limits []RateLimit) []*ratelimitv3.RateLimitDescriptor {
	md, _ := metadata.FromIncomingContext(ctx)
	return b.build(grpcSource{ctx: ctx, fullMethod: fullMethod, md: md}, limits)
}

// build allocates every entry and descriptor of the request in one slab
// each: a request costs the same few allocations however many actions.
func (b Builder) build(src source, limits []RateLimit) []*ratelimitv3.RateLimitDescriptor {
	n := 0
	for _, rl := range limits {
		n += len(rl.Actions)
	}
	entries := make([]ratelimitv3.RateLimitDescriptor_Entry, n)
	ptrs := make([]*ratelimitv3.RateLimitDescriptor_Entry, n)
	descs := make([]ratelimitv3.RateLimitDescriptor, len(limits))
	out := make([]*ratelimitv3.RateLimitDescriptor, 0, len(limits))
	k := 0
	for i, rl := range limits {
		start, whole := k, true
		for _, a := range rl.Actions {
			v, ok := b.value(src, a)
			if !ok {
				if a.skip {
					continue
				}
				whole = false
				break
			}
			entries[k].Key, entries[k].Value = a.key, v
			ptrs[k] = &entries[k]
			k++
		}
		if !whole || k == start {
			k = start
			continue
		}
		descs[i].Entries = ptrs[start:k:k]
		out = append(out, &descs[i])
	}
	return out
}

func (b Builder) value(src source, a Action) (string, bool) {
	switch a.kind {
	case actRemoteAddress:
		return src.remoteAddress(b.TrustedHops)
	case actRequestHeader:
		return src.header(a.arg)
	case actGenericKey:
		return a.arg, true
	case actPath:
		return src.path(), true
	case actMethod:
		return src.method(), true
	case actUser:
		return UserFrom(src.context())
	case actContext:
		return a.value(src.context())
	default:
		return "", false
	}
}

type httpSource struct{ r *http.Request }

func (s httpSource) context() context.Context { return s.r.Context() }
func (s httpSource) path() string             { return s.r.URL.Path }
func (s httpSource) method() string           { return s.r.Method }

func (s httpSource) header(name string) (string, bool) {
	switch name {
	case ":path":
		return s.r.URL.RequestURI(), true
	case ":method":
		return s.r.Method, true
	case ":authority":
		return s.r.Host, s.r.Host != ""
	case ":scheme":
		if s.r.TLS != nil {
			return "https", true
		}
		return "http", true
	}
	vs := s.r.Header.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

func (s httpSource) remoteAddress(hops int) (string, bool) {
	if hops > 0 {
		if ip, ok := fromXFF(s.r.Header.Values("X-Forwarded-For"), hops); ok {
			return ip, true
		}
	}
	host, _, err := net.SplitHostPort(s.r.RemoteAddr)
	if err != nil {
		return "", false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", false
	}
	if ip.Is4() {
		return host, true // ParseAddr refuses any IPv4 form but the canonical one
	}
	return ip.Unmap().String(), true
}

type grpcSource struct {
	ctx        context.Context
	fullMethod string
	md         metadata.MD
}

func (s grpcSource) context() context.Context { return s.ctx }
func (s grpcSource) path() string             { return s.fullMethod }
func (s grpcSource) method() string           { return http.MethodPost }

func (s grpcSource) header(name string) (string, bool) {
	switch name {
	case ":path":
		return s.fullMethod, true
	case ":method":
		return http.MethodPost, true
	}
	vs := s.md.Get(name)
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

func (s grpcSource) remoteAddress(hops int) (string, bool) {
	if hops > 0 {
		if ip, ok := fromXFF(s.md.Get("x-forwarded-for"), hops); ok {
			return ip, true
		}
	}
	p, ok := peer.FromContext(s.ctx)
	if !ok || p.Addr == nil {
		return "", false
	}
	tcp, ok := p.Addr.(*net.TCPAddr)
	if !ok {
		return "", false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return "", false
	}
	return ip.Unmap().String(), true
}

// fromXFF is the hops-th address from the right of the X-Forwarded-For
// field lines (one list, RFC 9110), if it is an IP.
func fromXFF(lines []string, hops int) (string, bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for {
			cut := strings.LastIndexByte(line, ',')
			if hops--; hops == 0 {
				ip, err := netip.ParseAddr(strings.TrimSpace(line[cut+1:]))
				if err != nil {
					return "", false
				}
				return ip.Unmap().String(), true
			}
			if cut < 0 {
				break
			}
			line = line[:cut]
		}
	}
	return "", false
}
