package daemon

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/redact"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

func TestSecretsOfSettings(t *testing.T) {
	tests := []struct {
		name string
		set  settings
		want []string
	}{
		{"none", settings{RedisURL: "127.0.0.1:6379"}, nil},
		{"REDIS_AUTH", settings{RedisAuth: "pw-a"}, []string{"pw-a"}},
		{"REDIS_AUTH user:password", settings{RedisAuth: "admin:pw-b"}, []string{"admin:pw-b", "pw-b"}},
		{"URL", settings{RedisURL: "rediss://user:pw-c@redis.example:6380/1"}, []string{"pw-c"}},
		{"user without password", settings{RedisURL: "redis://user@host:1"}, nil},
		{"Sentinel list", settings{RedisURL: "mymaster, redis://:pw-d@10.0.0.1:26379,redis://:pw-e@10.0.0.2:26379"}, []string{"pw-d", "pw-e"}},
		{"unparseable", settings{RedisURL: "redis://us er:pw-f@bad url"}, []string{"pw-f"}},
		// url.Parse reads "default:" as a scheme and the rest as opaque.
		{"userinfo without a scheme", settings{RedisURL: "default:pw-g@10.0.0.1:6379"}, []string{"pw-g"}},
		{"Cluster list without schemes", settings{RedisURL: "default:pw-h@10.0.0.1:6379,:pw-i@10.0.0.2:6379"}, []string{"pw-h", "pw-i"}},
		{"admin token", settings{Admin: adminSettings{Token: []byte("tok-0123456789abcdef")}}, []string{"tok-0123456789abcdef"}},
	}
	for _, tt := range tests {
		got := slices.DeleteFunc(tt.set.secrets(), func(s string) bool { return s == "" })
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: secrets = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// secretSettings hold every kind of secret the daemon knows.
var secretSettings = settings{
	RedisURL:  "redis://:pw-url-Zq8v3@127.0.0.1:1",
	RedisAuth: "default:pw-auth-K2m9",
	Admin:     adminSettings{Token: []byte("tok-admin-4f7a9c2e81d0")},
}

var secretValues = []string{"pw-url-Zq8v3", "pw-auth-K2m9", "tok-admin-4f7a9c2e81d0"}

// failingStore fails every call with an error quoting every secret, as a
// client library's error may quote the URL or the AUTH it failed with.
type failingStore struct{}

func (failingStore) Take(context.Context, []store.Request) ([]store.Result, error) {
	return nil, errors.New("dial " + secretSettings.RedisURL + ": AUTH " + secretSettings.RedisAuth + " with token " + string(secretSettings.Admin.Token) + " refused")
}

func (failingStore) Close() error { return nil }

// TestNoSecretReachesALog: a store error carrying the Redis URL, REDIS_AUTH
// and the admin token, logged by the service on a failed request and
// logged again by any call site through any logger the daemon derives
// (named, With fields, the info-level startup logger), shows no secret in
// either log format. Without the redacting encoder under newLoggers, every
// secret shows.
func TestNoSecretReachesALog(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(appConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := config.NewWatcher(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, jsonLogs := range []bool{false, true} {
		set := secretSettings
		set.LogJSON, set.LogLevel = jsonLogs, zap.DebugLevel
		var buf bytes.Buffer
		log, announce := newLoggers(set, &buf)
		svc, err := newService(set, w, failingStore{}, metrics.New(), log)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ShouldRateLimit(context.Background(), appRequest("k")); err == nil {
			t.Fatal("the failing store's request was answered")
		}
		storeErr := func() error { _, err := (failingStore{}).Take(context.Background(), nil); return err }()
		log.Named("leases").With(zap.Error(storeErr)).Warn("returning unused hits failed")
		log.Error("undo failed", zap.String("error", storeErr.Error()), zap.Any("cause", storeErr))
		announce.Info("ratelimitd listening", zap.String("redis", set.RedisURL))

		out := buf.String()
		if n := strings.Count(out, "\n"); n != 4 {
			t.Fatalf("json=%v: %d lines logged, want 4 (the service's backend error and 3 more):\n%s", jsonLogs, n, out)
		}
		for _, secret := range secretValues {
			if strings.Contains(out, secret) {
				t.Errorf("json=%v: %q is in the log:\n%s", jsonLogs, secret, out)
			}
		}
		if !strings.Contains(out, "redis://:"+redact.Mask+"@127.0.0.1:1") {
			t.Errorf("json=%v: the masked URL is not in the log:\n%s", jsonLogs, out)
		}
	}
}

// TestExitErrorHasNoSecret: a REDIS_URL the client cannot parse fails the
// start with go-redis's error, which quotes the URL; what run returns (and
// main prints) and what it logged show no password.
func TestExitErrorHasNoSecret(t *testing.T) {
	const password = "pw-exit-Hn3w"
	for _, url := range []string{
		"redis://:" + password + "@127.0.0.1:notaport",
		// No scheme: redisconn quotes the address it cannot split.
		"default:" + password + "@127.0.0.1:6379",
	} {
		var stderr bytes.Buffer
		err := Run(t.Context(), "test", []string{"--config", t.TempDir()}, envOf(map[string]string{
			"BACKEND_TYPE": "redis", "REDIS_URL": url, "LOG_LEVEL": "debug",
		}), &stderr)
		if err == nil {
			t.Fatalf("run started with the unusable REDIS_URL %q", url)
		}
		if strings.Contains(err.Error(), password) || strings.Contains(stderr.String(), password) {
			t.Errorf("the password shows:\nerror: %v\nlog: %s", err, stderr.String())
		}
		if !strings.Contains(err.Error(), "redis store: redisconn: ") {
			t.Errorf("error %q: want each layer's context once", err)
		}
	}
}

func appRequest(value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "app", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: value}},
	}}}
}
