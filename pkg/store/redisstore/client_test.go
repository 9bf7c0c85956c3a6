package redisstore

import (
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func build(t *testing.T, opts ...Option) (redis.UniversalClient, error) {
	t.Helper()
	s := defaults()
	for _, o := range opts {
		o(&s)
	}
	c, err := s.conn.NewClient()
	if c != nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

func TestSingleClientOptions(t *testing.T) {
	tlsCfg := &tls.Config{ServerName: "redis.example", MinVersion: tls.VersionTLS12}
	cases := []struct {
		name                  string
		opts                  []Option
		network, addr         string
		user, pass            string
		db                    int
		tls                   bool
		wantServerNameFromCfg bool
	}{
		{name: "host:port", opts: []Option{WithAddr("127.0.0.1:6379")}, network: "tcp", addr: "127.0.0.1:6379"},
		{name: "password", opts: []Option{WithAddr("r:6379"), WithAuth("s3cret")}, network: "tcp", addr: "r:6379", pass: "s3cret"},
		{name: "user:password", opts: []Option{WithAddr("r:6379"), WithAuth("alice:pa:ss")}, network: "tcp", addr: "r:6379", user: "alice", pass: "pa:ss"},
		{name: "redis url", opts: []Option{WithAddr("redis://bob:pw@r:6380/2")}, network: "tcp", addr: "r:6380", user: "bob", pass: "pw", db: 2},
		{name: "auth wins over url", opts: []Option{WithAddr("redis://bob:pw@r:6380"), WithAuth("other")}, network: "tcp", addr: "r:6380", pass: "other"},
		{name: "rediss url", opts: []Option{WithAddr("rediss://r:6380")}, network: "tcp", addr: "r:6380", tls: true},
		{name: "explicit tls", opts: []Option{WithAddr("r:6379"), WithTLS(tlsCfg)}, network: "tcp", addr: "r:6379", tls: true, wantServerNameFromCfg: true},
		{name: "unix socket", opts: []Option{WithAddr("/run/redis.sock"), WithSocketType("unix")}, network: "unix", addr: "/run/redis.sock"},
		{name: "unix url", opts: []Option{WithAddr("unix:///run/redis.sock")}, network: "unix", addr: "/run/redis.sock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := build(t, tc.opts...)
			if err != nil {
				t.Fatalf("newClient: %v", err)
			}
			rc, ok := c.(*redis.Client)
			if !ok {
				t.Fatalf("client is %T, want *redis.Client", c)
			}
			o := rc.Options()
			if o.Network != tc.network || o.Addr != tc.addr {
				t.Errorf("network/addr = %s %s, want %s %s", o.Network, o.Addr, tc.network, tc.addr)
			}
			if o.Username != tc.user || o.Password != tc.pass || o.DB != tc.db {
				t.Errorf("user/pass/db = %q %q %d, want %q %q %d", o.Username, o.Password, o.DB, tc.user, tc.pass, tc.db)
			}
			if (o.TLSConfig != nil) != tc.tls {
				t.Errorf("TLS = %v, want %v", o.TLSConfig != nil, tc.tls)
			}
			if tc.wantServerNameFromCfg && o.TLSConfig.ServerName != "redis.example" {
				t.Errorf("TLS server name = %q, want the configured one", o.TLSConfig.ServerName)
			}
		})
	}
}

func TestFailFastSettings(t *testing.T) {
	c, err := build(t, WithAddr("r:6379"), WithTimeout(250*time.Millisecond), WithPoolSize(7))
	if err != nil {
		t.Fatal(err)
	}
	o := c.(*redis.Client).Options()
	if o.MaxRetries != 0 {
		t.Errorf("MaxRetries = %d, want 0 (a retried EVALSHA can charge twice)", o.MaxRetries)
	}
	if o.DialerRetries != 1 {
		t.Errorf("DialerRetries = %d, want 1", o.DialerRetries)
	}
	for name, d := range map[string]time.Duration{"dial": o.DialTimeout, "read": o.ReadTimeout, "write": o.WriteTimeout, "pool": o.PoolTimeout} {
		if d != 250*time.Millisecond {
			t.Errorf("%s timeout = %s, want REDIS_TIMEOUT 250ms", name, d)
		}
	}
	if !o.ContextTimeoutEnabled {
		t.Error("ContextTimeoutEnabled is off: a caller's 20 ms deadline would not bound socket reads")
	}
	if o.PoolSize != 7 {
		t.Errorf("PoolSize = %d, want 7", o.PoolSize)
	}
}

func TestSentinelAndClusterClients(t *testing.T) {
	c, err := build(t, WithType(Sentinel), WithAddr("mymaster, s1:26379,s2:26379"), WithAuth("u:p"))
	if err != nil {
		t.Fatalf("sentinel: %v", err)
	}
	if rc, ok := c.(*redis.Client); !ok || rc.Options().Addr != "FailoverClient" {
		t.Errorf("sentinel client is %T, want a failover *redis.Client", c)
	} else if o := rc.Options(); o.Username != "u" || o.Password != "p" || o.MaxRetries != 0 {
		t.Errorf("sentinel master options: user %q pass %q retries %d", o.Username, o.Password, o.MaxRetries)
	}

	c, err = build(t, WithType(Cluster), WithAddr("n1:7000,n2:7001, n3:7002"), WithTimeout(time.Second))
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("cluster client is %T, want *redis.ClusterClient", c)
	}
	o := cc.Options()
	if !slices.Equal(o.Addrs, []string{"n1:7000", "n2:7001", "n3:7002"}) {
		t.Errorf("cluster seeds = %v", o.Addrs)
	}
	// ClusterOptions keeps -1 ("no retries") as given; nodes normalise it to 0.
	if o.MaxRetries > 0 || o.ReadTimeout != time.Second || !o.ContextTimeoutEnabled {
		t.Errorf("cluster fail-fast options: retries %d read %s ctx %v", o.MaxRetries, o.ReadTimeout, o.ContextTimeoutEnabled)
	}
}

func TestInvalidSettings(t *testing.T) {
	cases := map[string][]Option{
		"no address":         nil,
		"blank address":      {WithAddr("  ")},
		"no port":            {WithAddr("localhost")},
		"bad socket type":    {WithAddr("h:1"), WithSocketType("udp")},
		"bad url":            {WithAddr("redis://h:1/notadb")},
		"zero timeout":       {WithAddr("h:1"), WithTimeout(0)},
		"zero pool":          {WithAddr("h:1"), WithPoolSize(0)},
		"unknown type":       {WithAddr("h:1"), WithType(9)},
		"sentinel no master": {WithAddr("h:1"), WithType(Sentinel)},
		"cluster bad host":   {WithAddr("h:1,h2"), WithType(Cluster)},
	}
	for name, opts := range cases {
		if _, err := build(t, opts...); err == nil {
			t.Errorf("%s: newClient accepted it", name)
		}
	}
}

func TestParseType(t *testing.T) {
	for in, want := range map[string]Type{"SINGLE": Single, "sentinel": Sentinel, "Cluster": Cluster} {
		if got, err := ParseType(in); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "single ", "ring"} {
		if _, err := ParseType(in); err == nil {
			t.Errorf("ParseType(%q) accepted it", in)
		}
	}
}
