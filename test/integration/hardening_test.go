package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// TestDebugPortShowsNoSecret: a password given on the command line is on no
// endpoint of the debug port, with pprof off (the default) or on, and not in
// the logs.
func TestDebugPortShowsNoSecret(t *testing.T) {
	t.Parallel()
	const password = "pw-Dbg7x"
	rds := redistest.Start(t, "--requirepass", password)
	for _, pprof := range []bool{false, true} {
		t.Run(fmt.Sprint("DEBUG_PPROF=", pprof), func(t *testing.T) {
			root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
			svc := spawnServiceArgs(t, root, []string{"--redis-url", "redis://:" + password + "@" + rds.Addr}, "DEBUG_PPROF="+strconv.FormatBool(pprof))
			svc.waitHealthy(15 * time.Second)
			if _, err := svc.call(request("it", desc("generic_key", "fixed"))); err != nil {
				t.Fatalf("call through the authenticated Redis: %v", err)
			}
			base := "http://" + svc.debugAddr
			want := map[string]int{"/metrics": 200, "/rlconfig": 200, "/debug/pprof/cmdline": 404, "/debug/pprof/": 404, "/debug/pprof/goroutine?debug=2": 404}
			if pprof {
				want["/debug/pprof/"], want["/debug/pprof/goroutine?debug=2"] = 200, 200
			}
			for path, code := range want {
				got, body := get(t, base+path)
				if got != code {
					t.Errorf("GET %s = %d, want %d", path, got, code)
				}
				if strings.Contains(body, password) {
					t.Errorf("GET %s shows the password", path)
				}
			}
			if strings.Contains(svc.logs.String(), password) {
				t.Errorf("the logs show the password:\n%s", svc.logs.String())
			}
		})
	}
}

// TestRedisAuthFile: the password can come from a file, so it is in neither
// the environment nor the command line.
func TestRedisAuthFile(t *testing.T) {
	t.Parallel()
	const password = "pw-File3q"
	rds := redistest.Start(t, "--requirepass", password)
	dir := t.TempDir()
	good := filepath.Join(dir, "auth")
	if err := os.WriteFile(good, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
	svc := startService(t, root, "REDIS_URL="+rds.Addr, "REDIS_AUTH_FILE="+good)
	resp, err := svc.call(request("it", desc("generic_key", "fixed")))
	if err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("call with REDIS_AUTH_FILE: %v %v", resp, err)
	}
	if strings.Contains(svc.logs.String(), password) {
		t.Errorf("the logs show the password")
	}

	bad := map[string]struct {
		env  []string
		want string
	}{
		"missing file": {[]string{"REDIS_AUTH_FILE=" + filepath.Join(dir, "nope")}, "REDIS_AUTH_FILE"},
		"two lines":    {[]string{"REDIS_AUTH_FILE=" + writeTemp(t, password+"\nsecond\n")}, "want one non-empty line"},
		"both set":     {[]string{"REDIS_AUTH_FILE=" + good, "REDIS_AUTH=" + password}, "REDIS_AUTH and REDIS_AUTH_FILE are both set"},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(binPath)
			cmd.Env = append(os.Environ(), append([]string{"REDIS_URL=" + rds.Addr, "RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit"}, tt.env...)...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("started with a bad REDIS_AUTH_FILE:\n%s", out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("output %q does not mention %q", out, tt.want)
			}
			if strings.Contains(string(out), password) {
				t.Errorf("the error shows the password: %s", out)
			}
		})
	}
}

func writeTemp(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binPath, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("ratelimitd --help: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--config", "--grpc-addr", "--http-addr", "--debug-addr", "--backend", "--redis-url",
		"env GRPC_HOST:GRPC_PORT, default 0.0.0.0:8081", "env REDIS_URL", "env BACKEND_TYPE",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}

// TestEmptiedConfigDirectoryWarns: removing every file applies the empty
// config, as envoyproxy does, with a warning and a metric.
func TestEmptiedConfigDirectoryWarns(t *testing.T) {
	t.Parallel()
	root, dir := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
	svc := startService(t, root)
	if err := os.Remove(filepath.Join(dir, "it.yaml")); err != nil {
		t.Fatal(err)
	}
	svc.signal(syscall.SIGHUP)
	// The metric can be scraped before the warning reaches the log pipe:
	// wait for both.
	testkit.WaitFor(t, 10*time.Second, "the empty config to be counted and warned about", func() bool {
		return strings.Contains(scrape(t, svc), "ratelimitd_config_empty_loads_total 1") &&
			strings.Contains(svc.logs.String(), "no request is rate limited")
	})
	// Applied: a request that was limited is now OK.
	resp, err := svc.call(request("it", desc("generic_key", "zero")))
	if err != nil || resp.GetOverallCode() != ok {
		t.Errorf("with the empty config in force: %v %v, want OK", resp, err)
	}
}

// TestCheckReportsSyntaxErrorLine: `ratelimitd check` names the line of a
// YAML syntax error, and gives a non-UTF-8 file a line too.
func TestCheckReportsSyntaxErrorLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"indent.yaml": "domain: a\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n     requests_per_unit: 1\n",
		"latin1.yaml": "domain: b\ndescriptors:\n  - key: caf\xe9\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(binPath, "check", "--config", dir).CombinedOutput()
	if err == nil {
		t.Fatalf("check passed:\n%s", out)
	}
	for _, want := range []string{"indent.yaml:6: invalid YAML", "latin1.yaml:3: invalid YAML: not UTF-8"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
}

// metricValue reads an unlabelled sample from a /metrics body.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics lacks %s", name)
	return 0
}
