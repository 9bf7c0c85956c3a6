package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// The envoyproxy target runs the real envoyproxy/ratelimit binary
// (-envoyproxy, built outside this repo: GOBIN=/tmp/ref go install
// github.com/envoyproxy/ratelimit/src/service_cmd@latest) on the bench's
// Redis, with the one rule the scenario's key has in bench/config and its
// own defaults otherwise (USE_STATSD=false as for every target).

// envoyproxyUnits are envoyproxy's unit names for the durations a scenario's
// rule uses.
var envoyproxyUnits = map[time.Duration]string{
	time.Second: "second", time.Minute: "minute", time.Hour: "hour", 24 * time.Hour: "day",
}

// envoyproxyConfig is its config file for domain, with key's rule.
func envoyproxyConfig(domain, key string, unit time.Duration, limit uint64) (string, error) {
	name, ok := envoyproxyUnits[unit]
	if !ok {
		return "", fmt.Errorf("envoyproxy has no unit of %s", unit)
	}
	return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: %s\n    rate_limit:\n      unit: %s\n      requests_per_unit: %d\n",
		domain, key, name, limit), nil
}

// envoyproxyPorts are three ports for its gRPC, HTTP and debug listeners,
// chosen above rlbench's Redis ports (below 20000) and below the kernel's
// ephemeral range, so no outgoing connection holds them; a port another
// process holds makes the binary exit, and startEnvoyproxy tries others.
func envoyproxyPorts() [3]int {
	lo, hi := 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var low int
		if _, err := fmt.Sscan(string(b), &low); err == nil && low-3 > lo {
			hi = low
		}
	}
	p := lo + rand.IntN(hi-lo-3)
	return [3]int{p, p + 1, p + 2}
}

// startEnvoyproxy runs bin with its config under dir on redisAddr and
// waits for its /healthcheck.
func startEnvoyproxy(bin, dir string, o options, redisAddr string, logTo io.Writer) (*child, string, error) {
	conf, err := envoyproxyConfig(o.domain, o.key, o.modelUnit, o.modelLimit)
	if err != nil {
		return nil, "", err
	}
	root := filepath.Join(dir, "envoyproxy")
	confDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(confDir, "config.yaml"), []byte(conf), 0o644); err != nil {
		return nil, "", err
	}
	var errs []error
	for range 5 {
		ports := envoyproxyPorts()
		c, err := launchEnvoyproxy(bin, root, redisAddr, ports, logTo)
		if err == nil {
			return c, "127.0.0.1:" + strconv.Itoa(ports[0]), nil
		}
		errs = append(errs, err)
	}
	return nil, "", fmt.Errorf("envoyproxy/ratelimit did not start: %w", errors.Join(errs...))
}

func launchEnvoyproxy(bin, root, redisAddr string, ports [3]int, logTo io.Writer) (*child, error) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
		"USE_STATSD=false", "LOG_LEVEL=error",
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"GRPC_PORT="+strconv.Itoa(ports[0]), "PORT="+strconv.Itoa(ports[1]), "DEBUG_PORT="+strconv.Itoa(ports[2]))
	cmd.Stdout, cmd.Stderr = logTo, logTo
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := newChild("envoyproxy", cmd)
	health := "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/healthcheck"
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			return nil, fmt.Errorf("exited (ports %v)", ports)
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get(health); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
	}
	c.stop()
	return nil, fmt.Errorf("not healthy within 20 s (ports %v)", ports)
}
