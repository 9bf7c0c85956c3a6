package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

// readmeCommands returns the grpcurl and curl lines of README.md's sh blocks.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	inSh := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
		case strings.HasPrefix(line, "```"):
			inSh = false
		case inSh && (strings.HasPrefix(line, "grpcurl ") || strings.HasPrefix(line, "curl ")):
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// TestReadmeExamples runs the README's examples verbatim against the
// example config on the embedded store, as `make run` serves it.
func TestReadmeExamples(t *testing.T) {
	if grpcurlPath == "" {
		redistest.Missing(t, "grpcurl could not be installed")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "api", "examples", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "config.yaml"), string(example))
	svc := startService(t, root, "BACKEND_TYPE=memory", "REDIS_URL=")

	// What each example's comment in the README promises.
	expect := map[string][]string{
		" list":                              {"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health"},
		"203.0.113.7\"}]}]}' localhost:8081": {`"overallCode": "OK"`, `"limitRemaining": 59`, `"requestsPerUnit": 60`},
		"192.0.2.66":                         {`"overallCode": "OVER_LIMIT"`},
		"hitsAddend":                         {`"overallCode": "OK"`, `"limitRemaining": 495`, `"limitRemaining": 995`},
		"Health/Check":                       {`"status": "SERVING"`},
		"/json":                              {`"overallCode":"OK"`, `"limitRemaining":58`},
		"healthcheck":                        {"OK"},
	}
	cmds := readmeCommands(t)
	if len(cmds) < 6 {
		t.Fatalf("found only %d example commands in README.md", len(cmds))
	}
	matched := map[string]bool{}
	for _, line := range cmds {
		cmd := strings.ReplaceAll(line, "localhost:8081", svc.grpcAddr)
		cmd = strings.ReplaceAll(cmd, "localhost:8080", svc.httpAddr)
		if strings.HasPrefix(cmd, "grpcurl ") {
			cmd = grpcurlPath + strings.TrimPrefix(cmd, "grpcurl")
		}
		out, err := exec.Command("bash", "-c", cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("README example failed: %s\n%v\n%s", line, err, out)
		}
		for marker, wants := range expect {
			if !strings.Contains(line, marker) {
				continue
			}
			matched[marker] = true
			for _, want := range wants {
				if !strings.Contains(string(out), want) {
					t.Errorf("README example %s\noutput lacks %s:\n%s", line, want, out)
				}
			}
		}
	}
	for marker := range expect {
		if !matched[marker] {
			t.Errorf("no README example contains %q any more", marker)
		}
	}
}
