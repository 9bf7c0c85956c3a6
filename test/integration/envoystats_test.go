package integration

import (
	"math"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// envoyStatsConfig has every way envoyproxy builds a stats key: nested
// descriptors with a key-only leaf, a wildcard, share_threshold,
// detailed_metric, value_to_metric (with a value holding a dot), shadow_mode
// and an IPv4 value; requests add an override.
const envoyStatsConfig = `
domain: shop
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 5}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: file
    value: files*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 6}
  - key: client
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: route
    value_to_metric: true
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: beta
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: masked_remote_address
    value: 10.0.0.0/8
    rate_limit: {unit: hour, requests_per_unit: 3}
`

// envoyKind is one kind of request of the traffic, with envoyproxy's stats
// key and counter for a value, written from envoyproxy's rules (not from
// ratelimitd's code).
type envoyKind struct {
	values  []string
	entries func(v string) []string // key, value, ...
	statKey func(v string) string
	counter func(v string) string
	limit   uint64
	shadow  bool
	// override: the descriptor carries its own limit.
	override bool
}

func envoyKinds() []envoyKind {
	same := func(s string) func(string) string { return func(string) string { return s } }
	per := func(prefix string) func(string) string { return func(v string) string { return prefix + v } }
	return []envoyKind{
		{values: []string{"u1", "u2", "u3"}, entries: func(v string) []string { return []string{"tenant", "acme", "user", v} },
			statKey: same("shop.tenant_acme.user"), counter: per("tenant/"), limit: 5},
		{values: []string{"/api/a", "/api/b"}, entries: func(v string) []string { return []string{"path", v} },
			statKey: same("shop.path_/api/*"), counter: per("path/"), limit: 4},
		{values: []string{"files1", "files2", "files3"}, entries: func(v string) []string { return []string{"file", v} },
			statKey: same("shop.file_files*"), counter: same("file"), limit: 6},
		{values: []string{"c1", "c2", "c3"}, entries: func(v string) []string { return []string{"client", v} },
			statKey: per("shop.client_"), counter: per("client/"), limit: 3},
		{values: []string{"r1", "v1.beta"}, entries: func(v string) []string { return []string{"route", v} },
			statKey: per("shop.route_"), counter: per("route/"), limit: 4},
		{values: []string{"b1", "b2"}, entries: func(v string) []string { return []string{"beta", v} },
			statKey: same("shop.beta"), counter: per("beta/"), limit: 2, shadow: true},
		{values: []string{"10.0.0.0/8"}, entries: func(v string) []string { return []string{"masked_remote_address", v} },
			statKey: same("shop.masked_remote_address_10.0.0.0/8"), counter: same("ip"), limit: 3},
		{values: []string{"o1", "o2"}, entries: func(v string) []string { return []string{"override", v} },
			statKey: per("shop.override_"), counter: per("override/"), limit: 2, override: true},
	}
}

// envoyModel is envoyproxy's accounting of a sequence of one-descriptor
// requests on fixed windows, with ratelimitd's one difference: a denied
// request charges nothing (a shadow_mode one is never denied).
type envoyModel struct {
	counts map[string]uint64
	stats  map[string]uint64 // statsd name -> total
	calls  int               // ShouldRateLimit calls over gRPC
	// cache models LOCAL_CACHE_SIZE_IN_BYTES; nil without it.
	cache *cacheModel
}

// sanitize is envoyproxy's SanitizeStatName.
var ipv4Like = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

func sanitize(key string) string {
	key = strings.NewReplacer(":", "_", "|", "_").Replace(key)
	return ipv4Like.ReplaceAllStringFunc(key, func(s string) string { return strings.ReplaceAll(s, ".", "_") })
}

func (m *envoyModel) add(key, stat string, n uint64) {
	if n > 0 {
		m.stats["ratelimit.service.rate_limit."+sanitize(key)+"."+stat] += n
	}
}

// decide returns the code envoyproxy answers and counts the stats its
// limiter counts (base_limiter.go).
func (m *envoyModel) decide(key, counter string, limit, hits uint64, shadow bool) rlsv3.RateLimitResponse_Code {
	if m.cache.answers(counter, hits, shadow) {
		m.add(key, "total_hits", hits)
		m.add(key, "over_limit", hits)
		m.add(key, "over_limit_with_local_cache", hits)
		return over
	}
	before := m.counts[counter]
	after := before + hits
	near := uint64(math.Floor(float64(float32(limit) * float32(0.8))))
	m.add(key, "total_hits", hits)
	if after <= limit {
		m.counts[counter] = after
		if after > near {
			m.add(key, "near_limit", after-max(near, before))
		}
		m.add(key, "within_limit", hits)
		return ok
	}
	past := hits
	if before < limit {
		past = after - limit
		m.add(key, "near_limit", limit-max(near, before))
	}
	m.add(key, "over_limit", past)
	m.cache.learn(counter, hits, shadow, before == limit)
	if shadow {
		m.add(key, "shadow_mode", past)
		m.counts[counter] = after
		return ok
	}
	return over
}

// TestEnvoyproxyStats drives the binary with random traffic over every way
// of building a stats key and holds what it sends to statsd (over TCP)
// and what PROMETHEUS_ADDR serves under ratelimit_service_* to the model:
// every name, label and value; with the local cache, its gauges too.
func TestEnvoyproxyStats(t *testing.T) {
	t.Parallel()
	t.Run("without local cache", func(t *testing.T) { testEnvoyproxyStats(t, false) })
	t.Run("with LOCAL_CACHE_SIZE_IN_BYTES", func(t *testing.T) { testEnvoyproxyStats(t, true) })
}

func testEnvoyproxyStats(t *testing.T, cached bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lines := &statsdLines{counters: map[string]uint64{}, timers: map[string]int{}, gauges: map[string]uint64{}}
	go lines.serve(ln)

	root, _ := newConfigRoot(t, map[string]string{"shop.yaml": envoyStatsConfig})
	env := []string{"USE_STATSD=true", "STATSD_PROTOCOL=tcp", "STATSD_HOST=127.0.0.1",
		"STATSD_PORT=" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "STATS_FLUSH_INTERVAL=100ms",
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0"}
	m := &envoyModel{counts: map[string]uint64{}, stats: map[string]uint64{"ratelimit.service.config_load_success": 1}}
	if cached {
		env = append(env, "LOCAL_CACHE_SIZE_IN_BYTES=1048576")
		m.cache = &cacheModel{known: map[string]uint64{}, start: time.Now().Unix()}
	}
	svc := startService(t, root, env...)
	// The model counts one hourly window: the random traffic (a second or
	// two) must not cross an hour.
	roomInWindow(t, time.Hour, 30*time.Second)
	hour := time.Now().Truncate(time.Hour)
	m.drive(t, svc)
	if cached {
		m.mixedRequest(t, svc)
	}
	m.stats["ratelimit_server.ShouldRateLimit.total_requests"] = uint64(m.calls)
	if time.Now().Truncate(time.Hour) != hour {
		t.Fatalf("an hour began during the run, though it started %s before one: the windows restarted under the model", 30*time.Second)
	}

	// statsd: every line is one the model names, and the totals arrive.
	testkit.WaitFor(t, 10*time.Second, "statsd totals equal to the model", func() bool {
		c, timers := lines.snapshot()
		return equalCounts(c, m.stats) && timers["ratelimit_server.ShouldRateLimit.response_time"] == m.calls
	})
	c, timers := lines.snapshot()
	if len(timers) != 1 {
		t.Errorf("statsd timers %v, want ShouldRateLimit's response_time alone", timers)
	}
	if diff := diffCounts(c, m.stats); diff != "" {
		t.Errorf("statsd counters differ from the model:\n%s", diff)
	}

	// Prometheus: the built-in mapping of the model's names.
	got := scrapeEnvoySeries(t, "http://"+svc.promAddr+"/metrics")
	want := mapDefault(m.stats)
	want[`ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}`] = float64(m.calls)
	if diff := diffSeries(got, want); diff != "" {
		t.Errorf("PROMETHEUS_ADDR's ratelimit_service_* series differ from the model:\n%s", diff)
	}
	m.cache.check(t, lines, "http://"+svc.promAddr+"/metrics")
}

// drive sends the random traffic over every kind of descriptor, then a
// request of an unknown domain and one without a domain, each checked
// against the model's answer and counted in it.
func (m *envoyModel) drive(t *testing.T, svc *service) {
	t.Helper()
	rng := rand.New(rand.NewPCG(27, 1))
	kinds := envoyKinds()
	// The shadow_mode rule crosses its limit with several hits first (1 + 2
	// on a limit of 2: over_limit, near_limit and shadow_mode 1 each), then
	// the random traffic draws 1 to 3 hits of every kind.
	shadow := slices.IndexFunc(kinds, func(k envoyKind) bool { return k.shadow })
	for i := range 302 {
		k := kinds[rng.IntN(len(kinds))]
		v := k.values[rng.IntN(len(k.values))]
		hits := uint64(1 + rng.IntN(3))
		if i < 2 {
			k, v, hits = kinds[shadow], kinds[shadow].values[0], uint64(1+i)
		}
		d := desc(k.entries(v)...)
		if k.override {
			d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(k.limit), Unit: 3} // HOUR
		}
		req := request("shop", d)
		req.HitsAddend = uint32(hits)
		want := m.decide(k.statKey(v), k.counter(v), k.limit, hits, k.shadow)
		resp, err := svc.call(req)
		m.calls++
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("call %d (%v=%v, %d hits): %v %v, want %v", i, k.entries(v), v, hits, resp.GetOverallCode(), err, want)
		}
	}
	// An unknown domain counts per descriptor; a request without a domain
	// is a service error (both are calls).
	if _, err := svc.call(request("ghost", desc("a", "1"), desc("b", "2"))); err != nil {
		t.Fatal(err)
	}
	m.stats["ratelimit.service.rate_limit.ghost.domain_not_found"] = 2
	if _, err := svc.call(request("", desc("a", "1"))); err == nil {
		t.Fatal("a request without a domain was answered")
	}
	m.stats["ratelimit.service.call.should_rate_limit.service_error"] = 1
	m.calls += 2
}
