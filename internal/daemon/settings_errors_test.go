package daemon

import (
	"strings"
	"testing"
)

// parseOrReject parses env as the settings; when wantErr is set it checks
// the parse fails naming it and reports false (nothing left to compare).
func parseOrReject(t *testing.T, env map[string]string, wantErr string) (settings, bool) {
	t.Helper()
	s, err := parseSettings(nil, envOf(env))
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err %v, want one naming %s", err, wantErr)
		}
		return s, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

func TestParseSettingsErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string // every one must appear in the error
	}{
		{name: "bad port", env: map[string]string{"PORT": "http"}, want: []string{`PORT="http"`, "integer between 0 and 65535"}},
		{name: "port out of range", env: map[string]string{"GRPC_PORT": "70000"}, want: []string{`GRPC_PORT="70000"`}},
		{name: "duration without unit", env: map[string]string{"REDIS_TIMEOUT": "10"}, want: []string{`REDIS_TIMEOUT="10"`, "Go duration"}},
		{name: "zero redis timeout", env: map[string]string{"REDIS_TIMEOUT": "0s"}, want: []string{"REDIS_TIMEOUT", "positive"}},
		{name: "zero probe interval", env: map[string]string{"REDIS_BREAKER_PROBE_INTERVAL": "0"}, want: []string{"REDIS_BREAKER_PROBE_INTERVAL", "positive"}},
		{name: "negative breaker threshold", env: map[string]string{"REDIS_BREAKER_THRESHOLD": "-1"}, want: []string{`REDIS_BREAKER_THRESHOLD="-1"`}},
		{name: "bad boolean", env: map[string]string{"SHADOW_MODE": "maybe"}, want: []string{`SHADOW_MODE="maybe"`, "true or false"}},
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "loud"}, want: []string{`LOG_LEVEL="loud"`}},
		{name: "bad log format", env: map[string]string{"LOG_FORMAT": "xml"}, want: []string{`LOG_FORMAT="xml"`, "text, json"}},
		{name: "bad redis type", env: map[string]string{"REDIS_TYPE": "ring"}, want: []string{`REDIS_TYPE="ring"`, "SINGLE, SENTINEL, CLUSTER"}},
		{name: "bad socket type", env: map[string]string{"REDIS_SOCKET_TYPE": "udp"}, want: []string{`REDIS_SOCKET_TYPE="udp"`}},
		{name: "bad pool size", env: map[string]string{"REDIS_POOL_SIZE": "0"}, want: []string{`REDIS_POOL_SIZE="0"`}},
		{name: "bad STATSD_PROTOCOL", env: map[string]string{"STATSD_PROTOCOL": "sctp"}, want: []string{`STATSD_PROTOCOL="sctp"`, "tcp, udp"}},
		{name: "zero STATS_FLUSH_INTERVAL", env: map[string]string{"STATS_FLUSH_INTERVAL": "0s"}, want: []string{"STATS_FLUSH_INTERVAL", "positive"}},
		{name: "bad EXTRA_TAGS", env: map[string]string{"EXTRA_TAGS": "env=prod"}, want: []string{`EXTRA_TAGS="env=prod"`, "key:value"}},
		{name: "mogrifier without a pattern", env: map[string]string{"USE_DOG_STATSD": "true", "USE_DOG_STATSD_MOGRIFIERS": "x"},
			want: []string{"DOG_STATSD_MOGRIFIER_X_PATTERN"}},
		{name: "bad backend", env: map[string]string{"BACKEND_TYPE": "memcache"}, want: []string{`BACKEND_TYPE="memcache"`}},
		{name: "redis without a URL", env: map[string]string{"BACKEND_TYPE": "redis"}, want: []string{"BACKEND_TYPE=redis needs REDIS_URL"}},
		{name: "half a client certificate", env: map[string]string{"REDIS_TLS_CLIENT_CERT": "/c.pem"}, want: []string{"REDIS_TLS_CLIENT_KEY"}},
		{name: "every bad variable at once", env: map[string]string{"PORT": "x", "DEBUG_PORT": "y", "REDIS_TLS": "z"},
			want: []string{`PORT="x"`, `DEBUG_PORT="y"`, `REDIS_TLS="z"`}},
		{name: "bad LEASE_ENABLED", env: map[string]string{"LEASE_ENABLED": "sometimes"}, want: []string{`LEASE_ENABLED="sometimes"`, "true or false"}},
		{name: "bad ON_STORE_ERROR", env: map[string]string{"ON_STORE_ERROR": "open"}, want: []string{`ON_STORE_ERROR="open"`, "unavailable, allow, deny or local"}},
		{name: "bad LOCAL_FALLBACK_*", env: map[string]string{"LOCAL_FALLBACK_REPLICAS": "0", "LOCAL_FALLBACK_HEARTBEAT": "2m"},
			want: []string{`LOCAL_FALLBACK_REPLICAS="0"`, `LOCAL_FALLBACK_HEARTBEAT="2m"`}},
		{name: "zero LEASE_TARGET", env: map[string]string{"LEASE_TARGET": "0s"}, want: []string{`LEASE_TARGET="0s"`, "positive Go duration of at most 24h0m0s"}},
		{name: "LEASE_IDLE without a unit", env: map[string]string{"LEASE_IDLE": "2"}, want: []string{`LEASE_IDLE="2"`, "Go duration"}},
		{name: "LEASE_MAX_AGE over a day", env: map[string]string{"LEASE_MAX_AGE": "25h"}, want: []string{`LEASE_MAX_AGE="25h"`, "at most 24h0m0s"}},
		{name: "LEASE_MAX_BLOCK of 1", env: map[string]string{"LEASE_MAX_BLOCK": "1"}, want: []string{`LEASE_MAX_BLOCK="1"`, "between 2 and 1099511627776"}},
		{name: "LEASE_FRACTION of 0", env: map[string]string{"LEASE_FRACTION": "0"}, want: []string{`LEASE_FRACTION="0"`, "above 0 and at most 1"}},
		{name: "LEASE_FRACTION above 1", env: map[string]string{"LEASE_FRACTION": "1.5"}, want: []string{`LEASE_FRACTION="1.5"`}},
		{name: "LEASE_FRACTION NaN", env: map[string]string{"LEASE_FRACTION": "NaN"}, want: []string{`LEASE_FRACTION="NaN"`}},
		{name: "LEASE_MAX_KEYS of 0", env: map[string]string{"LEASE_MAX_KEYS": "0"}, want: []string{`LEASE_MAX_KEYS="0"`}},
		{name: "every bad LEASE_ setting at once", env: map[string]string{"LEASE_TARGET": "-1s", "LEASE_MAX_BLOCK": "x", "LEASE_IDLE": "0"},
			want: []string{`LEASE_TARGET="-1s"`, `LEASE_MAX_BLOCK="x"`, `LEASE_IDLE="0"`}},
		{name: "RLQS_REPORTING_INTERVAL under a second", env: map[string]string{"RLQS_REPORTING_INTERVAL": "500ms"}, want: []string{`RLQS_REPORTING_INTERVAL="500ms"`, "at least 1s"}},
		{name: "RLQS_FRACTION of 0", env: map[string]string{"RLQS_FRACTION": "0"}, want: []string{`RLQS_FRACTION="0"`, "above 0"}},
		{name: "RLQS_MAX_BLOCK of 0", env: map[string]string{"RLQS_MAX_BLOCK": "0"}, want: []string{`RLQS_MAX_BLOCK="0"`}},
		{name: "unknown flag", args: []string{"--nope"}, want: []string{"flags", "nope"}},
		{name: "stray argument", args: []string{"serve"}, want: []string{`unexpected argument "serve"`}},
		{name: "bad flag address", args: []string{"--grpc-addr", "8081"}, want: []string{"--grpc-addr", "host:port"}},
		{name: "bad flag backend", args: []string{"--backend", "disk"}, want: []string{`"disk"`, "memory or redis"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseSettings(tt.args, envOf(tt.env))
			if err == nil {
				t.Fatal("parseSettings succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
