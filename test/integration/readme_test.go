package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeCommands returns the grpcurl and curl lines of doc's sh blocks (a
// path from the repository root, e.g. README.md).
func readmeCommands(t *testing.T, doc string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(doc)))
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

// rlqsExampleRoom is how long before the end of the hour an RLQS example
// of docs/rlqs.md still starts: ample for grpcurl to start and the report to
// reach the server on a loaded machine, and a wait only in the hour's last
// seconds.
const rlqsExampleRoom = 10 * time.Second

// readmeExamples says, per page, what each example's comment promises: a
// marker of the command, and what its output holds. The README keeps three
// grpcurl examples and /json; the ports' and RLQS's are on their pages.
var readmeExamples = []struct {
	doc    string
	expect map[string][]string
}{
	{"README.md", map[string][]string{
		"203.0.113.7\"}]}]}' localhost:8081": {`"overallCode": "OK"`, `"limitRemaining": 59`, `"requestsPerUnit": 60`},
		"192.0.2.66\"}]}]}'":                 {`"overallCode": "OVER_LIMIT"`},
		"hitsAddend":                         {`"overallCode": "OK"`, `"limitRemaining": 495`, `"limitRemaining": 995`},
		"/json":                              {`"overallCode":"OK"`, `"limitRemaining":58`},
	}},
	{"docs/operations.md", map[string][]string{
		" list":        {"envoy.service.ratelimit.v3.RateLimitService", "envoy.service.rate_limit_quota.v3.RateLimitQuotaService", "grpc.health.v1.Health"},
		"Health/Check": {`"status": "SERVING"`},
		"healthcheck":  {"OK"},
	}},
	{"docs/rlqs.md", map[string][]string{
		// A grant charged in carol's counter (none in the hour's last
		// second and expiry margin, too late for a whole-second TTL to end
		// in it).
		`"user_id":"carol"`:     {`"tokenBucket"`, `"maxTokens"`, `"tokensPerFill"`, `"assignmentTimeToLive"`},
		`"numRequestsDenied":1`: {`"blanketRule": "DENY_ALL"`},
	}},
}

// TestReadmeExamples runs the examples of the README (and of the pages
// its examples moved to) verbatim against the example config on the
// embedded store, as `make run` serves it, each page on a fresh service.
func TestReadmeExamples(t *testing.T) {
	t.Parallel()
	needGrpcurl(t)
	for _, page := range readmeExamples {
		t.Run(page.doc, func(t *testing.T) {
			runExamples(t, page.doc, page.expect)
		})
	}
}

func runExamples(t *testing.T, doc string, expect map[string][]string) {
	svc := startExample(t)
	cmds := readmeCommands(t, doc)
	if len(cmds) < len(expect) {
		t.Fatalf("found only %d example commands in %s", len(cmds), doc)
	}
	matched := map[string]bool{}
	for _, line := range cmds {
		cmd := strings.ReplaceAll(line, "localhost:8081", svc.grpcAddr)
		cmd = strings.ReplaceAll(cmd, "localhost:8080", svc.httpAddr)
		if strings.HasPrefix(cmd, "grpcurl ") {
			cmd = grpcurlPath + strings.TrimPrefix(cmd, "grpcurl")
		}
		if strings.Contains(line, "RateLimitQuotaService/") {
			// An RLQS assignment of an hourly window ends with the hour,
			// less RLQS_EXPIRY_MARGIN and a whole-second TTL: in the hour's
			// last 1.1 s there is none to give (docs/rlqs.md's "less a
			// second").
			roomInWindow(t, time.Hour, rlqsExampleRoom)
		}
		out, err := exec.Command("bash", "-c", cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("%s example failed: %s\n%v\n%s", doc, line, err, out)
		}
		for marker, wants := range expect {
			if !strings.Contains(line, marker) {
				continue
			}
			matched[marker] = true
			for _, want := range wants {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s example %s\noutput lacks %s:\n%s", doc, line, want, out)
				}
			}
		}
	}
	for marker := range expect {
		if !matched[marker] {
			t.Errorf("no %s example contains %q any more", doc, marker)
		}
	}
}

// readmeScripts returns the bash blocks of doc (a path from the repository
// root, e.g. docs/queue.md) that mention needle: shell scripts whose
// commands depend on each other (a receipt from a claim).
func readmeScripts(t *testing.T, doc, needle string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(doc)))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "```bash"):
			in, cur = true, nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			if b := strings.Join(cur, "\n"); strings.Contains(b, needle) {
				blocks = append(blocks, b)
			}
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// TestReadmeQueueExamples runs the delay queue's examples in docs/queue.md
// verbatim, as one script, on the embedded store as `make run` serves it.
func TestReadmeQueueExamples(t *testing.T) {
	t.Parallel()
	needGrpcurl(t)
	scripts := readmeScripts(t, "docs/queue.md", "ratelimitd.queue.v1.DelayQueue/")
	if len(scripts) != 1 {
		t.Fatalf("found %d delay queue example blocks in docs/queue.md, want 1", len(scripts))
	}
	svc := startExample(t)

	list, err := exec.Command(grpcurlPath, "-plaintext", svc.grpcAddr, "list").CombinedOutput()
	if err != nil || !strings.Contains(string(list), "ratelimitd.queue.v1.DelayQueue") {
		t.Fatalf("reflection does not list the delay queue: %v\n%s", err, list)
	}
	script := strings.ReplaceAll(scripts[0], "localhost:8081", svc.grpcAddr)
	script = strings.ReplaceAll(script, "grpcurl ", grpcurlPath+" ")
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/queue.md examples failed: %v\n%s", err, out)
	}
	// Enqueue's answer, the claim (first attempt, with a receipt), and
	// Ack's empty answer.
	for _, want := range []string{`"id": "welcome-42"`, `"deliverAt"`, `"payload": "aGVsbG8="`, `"attempt": 1`, `"receipt": "`, "\n{}\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("docs/queue.md examples' output lacks %q:\n%s", want, out)
		}
	}
	// The ack really deleted it: nothing left to claim.
	left, err := exec.Command(grpcurlPath, "-plaintext", "-d", `{"queue":"emails","max_messages":10}`, svc.grpcAddr, "ratelimitd.queue.v1.DelayQueue/Claim").CombinedOutput()
	if err != nil || strings.Contains(string(left), "welcome-42") {
		t.Fatalf("after the example's ack: %v\n%s", err, left)
	}
}

// startExample serves the example config on the embedded store, as
// `make run` does.
func startExample(t *testing.T, env ...string) *service {
	t.Helper()
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
	return startService(t, root, append([]string{"BACKEND_TYPE=memory", "REDIS_URL="}, env...)...)
}

// TestReadmeCountersExamples runs the counters API's examples in
// docs/counters.md verbatim, as one script, against the example config with
// a token file.
func TestReadmeCountersExamples(t *testing.T) {
	t.Parallel()
	needGrpcurl(t)
	scripts := readmeScripts(t, "docs/counters.md", "ratelimitd.admin.v1.Counters/")
	if len(scripts) != 1 {
		t.Fatalf("found %d counters API example blocks in docs/counters.md, want 1", len(scripts))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("readme-example-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := startExample(t, "ADMIN_TOKEN_FILE="+filepath.Join(dir, "admin.token"))

	list, err := exec.Command(grpcurlPath, "-plaintext", svc.grpcAddr, "list").CombinedOutput()
	if err != nil || !strings.Contains(string(list), "ratelimitd.admin.v1.Counters") {
		t.Fatalf("reflection does not list the counters API: %v\n%s", err, list)
	}
	script := strings.ReplaceAll(scripts[0], "localhost:8081", svc.grpcAddr)
	script = strings.ReplaceAll(script, "localhost:6070", svc.debugAddr)
	script = strings.ReplaceAll(script, "grpcurl ", grpcurlPath+" ")
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/counters.md examples failed: %v\n%s", err, out)
	}
	// What the examples' comments promise, in order: the call, Get, List,
	// the refused Reset, the Reset, and the HTTP Get and List (protojson
	// varies its spacing, so compare without it).
	flat := strings.Join(strings.Fields(string(out)), "")
	for _, want := range []string{`"limitRemaining":59`, `"used":"1"`, `"remaining":"59"`, `"value":"198.51.100.9"`,
		"Code:Unauthenticated", `"deleted":1`, `"existed":true`, `"remaining":"60"`, `}]}{}`} {
		if !strings.Contains(flat, want) {
			t.Errorf("docs/counters.md examples' output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(string(out), "Code: Unauthenticated") > strings.Index(string(out), `"deleted": 1`) {
		t.Errorf("the refused reset did not come before the real one:\n%s", out)
	}
}
