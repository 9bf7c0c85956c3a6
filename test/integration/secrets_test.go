package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// Credentials reach Redis but never the logs, including the error lines
// logged while Redis is down.
func TestRedisCredentialsNeverLogged(t *testing.T) {
	t.Parallel()
	const password = "pw-Zq8v3"
	tests := map[string]func(addr string) []string{
		"REDIS_AUTH":          func(addr string) []string { return []string{"REDIS_URL=" + addr, "REDIS_AUTH=" + password} },
		"REDIS_AUTH user":     func(addr string) []string { return []string{"REDIS_URL=" + addr, "REDIS_AUTH=default:" + password} },
		"password in the URL": func(addr string) []string { return []string{"REDIS_URL=redis://:" + password + "@" + addr} },
	}
	for name, env := range tests {
		t.Run(name, func(t *testing.T) {
			rds := redistest.Start(t, "--requirepass", password)
			root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
			svc := startService(t, root, append(env(rds.Addr), "LOG_LEVEL=debug", "REDIS_TIMEOUT=200ms")...)
			resp, err := svc.call(request("it", desc("global", "auth")))
			if err != nil || resp.GetOverallCode() != ok {
				t.Fatalf("authenticated call: %v %v", resp, err)
			}
			rds.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = svc.client.ShouldRateLimit(ctx, request("it", desc("global", "auth")))
			cancel()
			if err == nil {
				t.Fatal("Redis down: want an error")
			}
			testkit.WaitFor(t, 5*time.Second, "the backend error to be logged", func() bool {
				return strings.Contains(svc.logs.String(), "backend")
			})
			if logs := svc.logs.String(); strings.Contains(logs, password) {
				t.Fatalf("the Redis password appears in the logs:\n%s", logs)
			}
		})
	}
}
