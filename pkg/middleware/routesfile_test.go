package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/middleware"
)

// parseErrorCases are routes files and the errors Parse reports, each
// file:line: field: message.
var parseErrorCases = []struct {
	name, yaml string
	want       []string
}{
	{"empty", "", []string{"routes.yaml: domain: empty file; want domain and routes"}},
	{"syntax", "domain: [x\n", []string{"routes.yaml:1: invalid YAML: did not find expected ',' or ']'"}},
	// yaml.v3 names the line of the enclosing list (2); the error is on 6.
	{"syntax on its line", "domain: a\nhttp:\n  - pattern: \"GET /x\"\n    rate_limits:\n      - actions: [{path: }]\n   bad: 1\n",
		[]string{"routes.yaml:6: invalid YAML: did not find expected '-' indicator"}},
	{"no domain", "http: []\n", []string{"routes.yaml:1: http: empty list", "routes.yaml:1: domain: missing"}},
	{"two documents", "domain: a\n---\ndomain: b\n", []string{"routes.yaml:2: more than one YAML document"}},
	{"unknown top key", "domain: a\nroutes: []\n", []string{`routes.yaml:2: routes: unknown key "routes" (want one of domain, http, grpc)`}},
	{"repeated key", "domain: a\ndomain: b\n", []string{"routes.yaml:2: domain: repeated key (first at line 1)"}},
	{"alias", "domain: &d a\ngrpc:\n  - method: *d\n    rate_limits: [{actions: [{path: }]}]\n",
		[]string{"routes.yaml:3: grpc[0].method: YAML aliases are not supported in a routes file"}},
	{"route fields", `domain: a
http:
  - pattern: "GET /x"
    rate_limit: []
  - rate_limits:
      - actions: [{path: }]
`, []string{
		`routes.yaml:4: http[0].rate_limit: unknown key "rate_limit" (want one of pattern, rate_limits)`,
		"routes.yaml:3: http[0].rate_limits: missing",
		"routes.yaml:5: http[1].pattern: missing",
	}},
	{"actions", `domain: a
grpc:
  - method: /e.E/Say
    rate_limits:
      - actions:
          - remote_address: {x: 1}
          - request_headers: {header_name: x-key}
          - generic_key: {descriptor_key: k}
          - {path: {}, method: {}}
          - user: {descriptor_key: 7, extra: no}
          - teleport: {}
          - request_headers: {header_name: a, descriptor_key: b, skip_if_absent: maybe}
      - {}
      - actions: []
`, []string{
		`routes.yaml:6: grpc[0].rate_limits[0].actions[0].remote_address.x: unknown key "x" (remote_address takes no fields)`,
		"routes.yaml:7: grpc[0].rate_limits[0].actions[1].request_headers.descriptor_key: missing",
		"routes.yaml:8: grpc[0].rate_limits[0].actions[2].generic_key.descriptor_value: missing",
		"routes.yaml:9: grpc[0].rate_limits[0].actions[3]: want exactly one action",
		`routes.yaml:10: grpc[0].rate_limits[0].actions[4].user.extra: unknown key "extra" (want one of descriptor_key)`,
		`routes.yaml:11: grpc[0].rate_limits[0].actions[5].teleport: unknown key "teleport"`,
		`routes.yaml:12: grpc[0].rate_limits[0].actions[6].request_headers.skip_if_absent: want true or false, got str "maybe"`,
		"routes.yaml:13: grpc[0].rate_limits[1].actions: missing",
		"routes.yaml:14: grpc[0].rate_limits[2].actions: empty list",
	}},
	{"what only New finds", `domain: a
http:
  - pattern: "GET /a/{x}"
    rate_limits: [{actions: [{path: }]}]
  - pattern: "GET /a/{y}"
    rate_limits: [{actions: [{path: }]}]
  - pattern: "GET /b/{x"
    rate_limits: [{actions: [{path: }]}]
grpc:
  - method: /e.E/*
    rate_limits: [{actions: [{path: }]}]
  - method: /e.E/*
    rate_limits: [{actions: [{path: }]}]
`, []string{
		`routes.yaml:5: http[1].pattern: pattern "GET /a/{y}" conflicts with pattern "GET /a/{x}": GET /a/{y} matches the same requests as GET /a/{x} (the route at routes.yaml:3)`,
		`routes.yaml:7: http[2].pattern: parsing "GET /b/{x": at offset 7: bad wildcard segment (must end with '}')`,
		`routes.yaml:12: grpc[1].method: "/e.E/*" repeats the route at routes.yaml:10`,
	}},
}

// TestParseErrors: every error names file:line and the field, and a file's
// errors come all at once.
func TestParseErrors(t *testing.T) {
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := middleware.Parse("routes.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("%d errors, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestLoadMatchesCode: a routes file and the same routes written in Go
// send the same descriptors.
func TestLoadMatchesCode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(path, []byte(`domain: d
http:
  - pattern: "POST /orders"
    rate_limits:
      - actions:
          - user: {}
          - path: {descriptor_key: route}
      - actions:
          - remote_address: {}
          - request_headers: {header_name: x-plan, descriptor_key: plan, skip_if_absent: true}
          - method:
          - generic_key: {descriptor_value: orders}
          - request_headers: {header_name: ":authority", descriptor_key: host}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := middleware.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	inCode := middleware.Config{Domain: "d", HTTP: []middleware.Route{{Pattern: "POST /orders", RateLimits: []client.RateLimit{
		{Actions: []client.Action{client.User(""), client.Path("route")}},
		{Actions: []client.Action{client.RemoteAddress(), client.RequestHeader("x-plan", "plan", true), client.Method(""),
			client.GenericKey("", "orders"), client.RequestHeader(":authority", "host", false)}},
	}}}}
	var sent [][]string
	for _, cfg := range []middleware.Config{fromFile, inCode} {
		mw, rec := newRecorded(t, cfg)
		r := httptest.NewRequest(http.MethodPost, "http://shop.example/orders", nil)
		r = r.WithContext(client.WithUser(r.Context(), "alice"))
		mw.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
		sent = append(sent, rec.last(t))
	}
	want := []string{"user=alice,route=/orders", "remote_address=192.0.2.1,method=POST,generic_key=orders,host=shop.example"}
	if !reflect.DeepEqual(sent[0], want) || !reflect.DeepEqual(sent[1], want) {
		t.Errorf("file sent %q, code sent %q, want %q", sent[0], sent[1], want)
	}
	if _, err := middleware.Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("Load of a missing file: no error")
	}
}
