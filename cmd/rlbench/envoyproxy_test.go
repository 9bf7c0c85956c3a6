package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestEnvoyproxyConfig: the rule envoyproxy/ratelimit gets is the
// scenario's, in its units; a window it has no unit for is refused.
func TestEnvoyproxyConfig(t *testing.T) {
	got, err := envoyproxyConfig("bench", "fixed_window", time.Second, 1000)
	want := "domain: bench\ndescriptors:\n  - key: fixed_window\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000\n"
	if err != nil || got != want {
		t.Errorf("config = %q, %v; want %q", got, err, want)
	}
	if got, err := envoyproxyConfig("bench", "zipf", time.Hour, 1_000_000_000); err != nil || !contains(got, "unit: hour", "requests_per_unit: 1000000000") {
		t.Errorf("hourly config = %q, %v", got, err)
	}
	if _, err := envoyproxyConfig("bench", "x", 90*time.Second, 1); err == nil {
		t.Error("a 90 s window was accepted; envoyproxy has no such unit")
	}
	for range 100 {
		p := envoyproxyPorts()
		if p[0] < 20000 || p[2] >= 32768 || p[1] != p[0]+1 || p[2] != p[0]+2 {
			t.Fatalf("ports %v outside [20000, 32768) or not consecutive", p)
		}
	}
}

// TestEnvoyproxyTarget starts the real binary when one is at hand
// (RLBENCH_ENVOYPROXY, as make bench's -envoyproxy): a missing binary
// skips, as the bench's target needs one built outside the repo.
func TestEnvoyproxyTarget(t *testing.T) {
	bin := os.Getenv("RLBENCH_ENVOYPROXY")
	if bin == "" {
		t.Skip("RLBENCH_ENVOYPROXY is not set (a built envoyproxy/ratelimit service_cmd)")
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	redis, addr, err := startRedis(redisBin, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer redis.stop()
	o := options{domain: "bench", key: "fixed_window", modelUnit: time.Second, modelLimit: 1000}
	log, err := os.Create(filepath.Join(dir, "envoyproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	c, grpcAddr, err := startEnvoyproxy(bin, dir, o, addr, log)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The scenario's rule is in force: one request is answered under it.
	req := request("bench", "fixed_window", 1, func(int) string { return "v" })
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.GetStatuses(); resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(st) != 1 ||
		st[0].GetCurrentLimit().GetRequestsPerUnit() != 1000 || st[0].GetLimitRemaining() != 999 {
		t.Errorf("envoyproxy answered %v, want OK under 1000/s with 999 left", resp)
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
