package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ratelimitd/ratelimitd/pkg/client"
)

// Config is which requests are limited and with which descriptors: the Go
// form of Envoy's route rate_limits, given in code or read from a routes
// file (Parse, Load).
type Config struct {
	// Domain is the rules' domain every request is decided in.
	Domain string
	// HTTP routes match as a net/http ServeMux matches its patterns: the
	// most specific pattern wins.
	HTTP []Route
	// GRPC routes match a call's full method: an exact method wins over
	// its service's wildcard.
	GRPC []Route
}

// Route limits the requests its Pattern matches with its RateLimits: each
// makes one descriptor of the request, so a request can count against
// several rules at once (per user and path, and per address).
type Route struct {
	// Pattern is, for HTTP, a ServeMux pattern ("GET /items/{id}",
	// "example.com/admin/", "/"); for gRPC, a full method
	// ("/pkg.Service/Method") or a whole service ("/pkg.Service/*").
	Pattern    string
	RateLimits []client.RateLimit

	// file and line locate a route read from a routes file, for errors.
	file string
	line int
}

// Error is one error of a Config, located as internal/config locates the
// service's: file:line: field: message, for a route read from a file.
type Error struct {
	File  string
	Line  int
	Field string // e.g. http[0].rate_limits[1].actions[0]
	Msg   string
}

// Error renders file:line: field: message, omitting what is unset.
func (e *Error) Error() string {
	var parts []string
	if e.File != "" {
		loc := e.File
		if e.Line > 0 {
			loc += ":" + strconv.Itoa(e.Line)
		}
		parts = append(parts, loc)
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	return strings.Join(append(parts, e.Msg), ": ")
}

// Validate reports every error of c, joined: an empty domain, a route
// without rate limits, an invalid action, a pattern ServeMux refuses or
// two HTTP patterns it finds in conflict, a malformed or repeated gRPC
// method.
func (c Config) Validate() error {
	_, err := compile(c)
	return err
}

// routes is a compiled Config.
type routes struct {
	domain string
	// mux maps a request to the index of its HTTP route (a routeIndex
	// handler); it is never served.
	mux  *http.ServeMux
	http []Route
	// exact and services hold the gRPC routes by full method and by
	// service prefix ("/pkg.Service/").
	exact    map[string]*Route
	services map[string]*Route
}

// routeIndex marks which route a ServeMux pattern belongs to.
type routeIndex int

func (routeIndex) ServeHTTP(http.ResponseWriter, *http.Request) {}

func compile(c Config) (*routes, error) {
	var errs []error
	if c.Domain == "" {
		errs = append(errs, &Error{Field: "domain", Msg: "empty; name the rules' domain"})
	}
	c.HTTP, c.GRPC = cloneRoutes(c.HTTP), cloneRoutes(c.GRPC)
	r := &routes{domain: c.Domain, mux: http.NewServeMux(), http: c.HTTP,
		exact: map[string]*Route{}, services: map[string]*Route{}}
	for i := range c.HTTP {
		rt := &c.HTTP[i]
		field := fmt.Sprintf("http[%d]", i)
		errs = append(errs, checkLimits(rt, field)...)
		if err := handle(r.mux, rt.Pattern, routeIndex(i)); err != nil {
			errs = append(errs, rt.errorf(field+".pattern", "%s", muxMessage(err, c.HTTP[:i])))
		}
	}
	for i := range c.GRPC {
		rt := &c.GRPC[i]
		field := fmt.Sprintf("grpc[%d]", i)
		errs = append(errs, checkLimits(rt, field)...)
		if err := r.addMethod(rt); err != nil {
			errs = append(errs, rt.errorf(field+".method", "%v", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// cloneRoutes copies routes down to the actions, so that a caller changing
// its Config later changes nothing in a Middleware.
func cloneRoutes(in []Route) []Route {
	out := slices.Clone(in)
	for i := range out {
		out[i].RateLimits = slices.Clone(out[i].RateLimits)
		for j := range out[i].RateLimits {
			out[i].RateLimits[j].Actions = slices.Clone(out[i].RateLimits[j].Actions)
		}
	}
	return out
}

func checkLimits(rt *Route, field string) []error {
	if len(rt.RateLimits) == 0 {
		return []error{rt.errorf(field+".rate_limits", "empty; a route limits with at least one")}
	}
	var errs []error
	for j, rl := range rt.RateLimits {
		if err := rl.Validate(); err != nil {
			errs = append(errs, rt.errorf(fmt.Sprintf("%s.rate_limits[%d]", field, j), "%v", err))
		}
	}
	return errs
}

// handle registers a pattern, turning ServeMux's panics (a malformed
// pattern, two patterns in conflict) into an error.
func handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// registeredAt is ServeMux's note of where a pattern was registered: this
// file, which tells a user nothing.
var registeredAt = regexp.MustCompile(` \(registered at [^)]*\)`)

// muxMessage is ServeMux's complaint about a pattern, on one line, naming
// the earlier route a pattern conflicts with.
func muxMessage(err error, earlier []Route) string {
	msg := strings.ReplaceAll(registeredAt.ReplaceAllString(err.Error(), ""), ":\n", ": ")
	for i := range earlier {
		if strings.Contains(msg, fmt.Sprintf("conflicts with pattern %q", earlier[i].Pattern)) {
			return msg + " (the route " + earlier[i].where() + ")"
		}
	}
	return msg
}

func (r *routes) addMethod(rt *Route) error {
	p := rt.Pattern
	slash := strings.LastIndexByte(p, '/')
	if !strings.HasPrefix(p, "/") || slash <= 1 || slash == len(p)-1 {
		return fmt.Errorf("%q is not a full method: want /package.Service/Method or /package.Service/*", p)
	}
	into, key := r.exact, p
	if p[slash+1:] == "*" {
		into, key = r.services, p[:slash+1]
	}
	if first, dup := into[key]; dup {
		return fmt.Errorf("%q repeats the route %s", p, first.where())
	}
	into[key] = rt
	return nil
}

func (rt *Route) errorf(field, format string, args ...any) error {
	return &Error{File: rt.file, Line: rt.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (rt *Route) where() string {
	if rt.file == "" {
		return fmt.Sprintf("%q", rt.Pattern)
	}
	return fmt.Sprintf("at %s:%d", rt.file, rt.line)
}

// httpRoute is the route of r, or nil. ServeMux's own answers for a
// request no pattern takes (not found, or a redirect to the clean path)
// are not routes: such a request is not limited.
func (r *routes) httpRoute(req *http.Request) *Route {
	if len(r.http) == 0 {
		return nil
	}
	h, _ := r.mux.Handler(req)
	i, ok := h.(routeIndex)
	if !ok {
		return nil
	}
	return &r.http[i]
}

func (r *routes) grpcRoute(fullMethod string) *Route {
	if rt, ok := r.exact[fullMethod]; ok {
		return rt
	}
	if slash := strings.LastIndexByte(fullMethod, '/'); slash > 0 {
		return r.services[fullMethod[:slash+1]]
	}
	return nil
}
