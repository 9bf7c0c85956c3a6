package envoystats

import (
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	gostats "github.com/lyft/gostats"
	"go.uber.org/zap"
)

// readLines collects statsd lines from conn until want says it has them or
// the deadline passes.
func readLines(t *testing.T, conn net.PacketConn, want func(lines []string) bool) []string {
	t.Helper()
	var lines []string
	buf := make([]byte, 65536)
	deadline := time.Now().Add(10 * time.Second)
	for !want(lines) {
		if time.Now().After(deadline) {
			t.Fatalf("statsd lines so far: %q", lines)
		}
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			continue
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(buf[:n])), "\n")...)
	}
	return lines
}

func contains(lines []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			return false
		}
	}
	return true
}

// udpStatsd is a statsd sink over UDP to a socket the test reads.
func udpStatsd(t *testing.T) (net.PacketConn, gostats.Sink) {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sink, err := NewStatsd("127.0.0.1", conn.LocalAddr().(*net.UDPAddr).Port, "udp", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return conn, sink
}

// TestStatsdOverUDP: counters go out as name:delta|c (with EXTRA_TAGS in the
// name, as gostats writes them), timers as name:ms|ms.
func TestStatsdOverUDP(t *testing.T) {
	conn, sink := udpStatsd(t)
	s := New(sink, WithExtraTags(map[string]string{"cluster": "eu"}))
	defer s.Close()
	s.Count(s.Rule("d.k_v"), Decision{Hits: 2, Limit: 10})
	s.method("/pkg.Svc/Do").responseTime.AddValue(1.25)
	s.Flush()
	want := []string{
		"ratelimit.service.rate_limit.d.k_v.total_hits.__cluster=eu:2|c",
		"ratelimit.service.rate_limit.d.k_v.within_limit.__cluster=eu:2|c",
		"ratelimit_server.Do.response_time.__cluster=eu:1.250000|ms",
	}
	readLines(t, conn, func(l []string) bool { return contains(l, want...) })
}

// statsdLine is one well-formed statsd line: a name without separators or
// control characters, a value and a type.
var statsdLine = regexp.MustCompile(`^[^:|\x00-\x1f\x7f]+:[0-9.]+\|(c|g|ms)$`)

// TestStatsdLinesCarryNoControlCharacters: request values holding line
// ends, NULs and statsd's separators (a detailed_metric value, an unknown
// domain) reach a real UDP socket as '_' inside one line each, so that no
// value writes a stat of its own.
func TestStatsdLinesCarryNoControlCharacters(t *testing.T) {
	conn, sink := udpStatsd(t)
	s := New(sink)
	defer s.Close()
	s.Count(s.Rule("d.user_a\nevil.total_hits:9|c\r\x00b\x7f\tz"), Decision{Hits: 2, Limit: 10})
	s.DomainNotFound("gh\r\nost|x:1", 1)
	s.Flush()
	const p = "ratelimit.service.rate_limit."
	want := []string{
		p + "d.user_a_evil.total_hits_9_c__b__z.total_hits:2|c",
		p + "d.user_a_evil.total_hits_9_c__b__z.within_limit:2|c",
		p + "gh__ost_x_1.domain_not_found:1|c",
	}
	lines := readLines(t, conn, func(l []string) bool { return contains(l, want...) })
	for _, l := range lines {
		if !statsdLine.MatchString(l) || !contains(want, l) {
			t.Errorf("statsd line %q, want only %q", l, want)
		}
	}
}

// TestStatsdNeverBlocks: with an agent that is gone or that stops reading,
// counting, timing and flushing return; stats are dropped instead.
func TestStatsdNeverBlocks(t *testing.T) {
	stuck, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	go func() { // accept, never read
		for {
			c, err := stuck.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gonePort := gone.Addr().(*net.TCPAddr).Port
	gone.Close()
	for name, port := range map[string]int{"not reading": stuck.Addr().(*net.TCPAddr).Port, "gone": gonePort} {
		t.Run(name, func(t *testing.T) {
			sink, err := NewStatsd("127.0.0.1", port, "tcp", zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			s := New(sink)
			done := make(chan struct{})
			go func() {
				defer close(done)
				m := s.method("/pkg.Svc/Do")
				long := s.Rule("d." + strings.Repeat("k", 200))
				for i := range 200_000 { // about 20 MiB of lines, five times the sink's buffer
					m.responseTime.AddValue(float64(i))
					s.Count(long, Decision{Hits: 1, Limit: 1 << 30})
					if i%10_000 == 0 {
						s.Flush()
					}
				}
				s.Close()
			}()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("stats blocked on an agent that does not read")
			}
		})
	}
}

// TestDogStatsd: EXTRA_TAGS become DogStatsD tags, and the first matching
// mogrifier renames a stat and tags it with parts of its name.
func TestDogStatsd(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mogrifiers := []Mogrifier{
		{Pattern: regexp.MustCompile(`^ratelimit\.service\.rate_limit\.([^.]+)\.(.+)\.(total_hits|over_limit)$`),
			Name: "ratelimit.service.rate_limit.$3", Tags: map[string]string{"domain": "$1", "key": "$2"}},
		{Pattern: regexp.MustCompile(`^ratelimit\.`), Name: "never", Tags: nil}, // the first match wins
	}
	sink, err := NewDogStatsd("127.0.0.1", conn.LocalAddr().(*net.UDPAddr).Port, mogrifiers)
	if err != nil {
		t.Fatal(err)
	}
	s := New(sink, WithExtraTags(map[string]string{"env": "prod"}))
	defer s.Close()
	s.Count(s.Rule("d.k_v"), Decision{Hits: 3, Limit: 10})
	s.ServiceError()
	s.Flush()
	want := []string{
		"ratelimit.service.rate_limit.total_hits:3|c|#env:prod,domain:d,key:k_v",
		"never:3|c|#env:prod", // within_limit matches only the catch-all
		"never:1|c|#env:prod",
	}
	lines := readLines(t, conn, func(l []string) bool { return len(l) >= 3 })
	for i := range lines {
		lines[i] = sortTags(lines[i])
	}
	for _, w := range want {
		if !contains(lines, sortTags(w)) {
			t.Errorf("DogStatsD lines %q lack %q", lines, w)
		}
	}
}

// TestExpand: a mogrifier's $n take the pattern's groups; a group the
// pattern lacks stays as written, as in envoyproxy.
func TestExpand(t *testing.T) {
	groups := []string{"ratelimit.a.b", "a", "b"}
	for tmpl, want := range map[string]string{
		"rl.$1.$2":  "rl.a.b",
		"$0":        "ratelimit.a.b",
		"rl.$2.$3":  "rl.b.$3",
		"rl.$10":    "rl.$10",
		"no groups": "no groups",
	} {
		if got := expand(tmpl, groups); got != want {
			t.Errorf("expand(%q) = %q, want %q", tmpl, got, want)
		}
	}
}

// sortTags orders a DogStatsD line's tags (a map's order is not fixed).
func sortTags(line string) string {
	head, tags, ok := strings.Cut(line, "|#")
	if !ok {
		return line
	}
	parts := strings.Split(tags, ",")
	for i := range parts {
		for j := i + 1; j < len(parts); j++ {
			if parts[j] < parts[i] {
				parts[i], parts[j] = parts[j], parts[i]
			}
		}
	}
	return head + "|#" + strings.Join(parts, ",")
}
