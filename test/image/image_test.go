// Package image checks what can be checked of the container image without
// a container engine: the Dockerfile's final stage, and that the binary
// built as it builds it (CGO_ENABLED=0, version stamped; make test's, built
// once for every test that runs the binary) is static and runs as uid 65534
// from a read-only directory, as Envoy Gateway runs it.
package image

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

const nobody = 65534

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

type stage struct {
	from  string
	lines []string // instructions after FROM, continuation lines joined
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		instr := cur.String()
		cur.Reset()
		fields := strings.Fields(instr)
		if strings.EqualFold(fields[0], "FROM") {
			stages = append(stages, stage{from: fields[1]})
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, instr)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(repoRoot(t), "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	build, final := stages[len(stages)-2], stages[len(stages)-1]
	find := func(s stage, prefix string) []string {
		var out []string
		for _, l := range s.lines {
			if strings.HasPrefix(strings.ToUpper(l), prefix) {
				out = append(out, l)
			}
		}
		return out
	}
	if !strings.Contains(final.from, "distroless/static") && final.from != "scratch" {
		t.Errorf("final base %q: want distroless/static or scratch (no shell, no libc)", final.from)
	}
	users := find(final, "USER ")
	if len(users) == 0 {
		t.Fatal("final stage sets no USER: it would run as root")
	}
	user := strings.Fields(users[len(users)-1])[1]
	if uid, _, _ := strings.Cut(user, ":"); uid != fmt.Sprint(nobody) {
		t.Errorf("final USER %q, want %d:%d", user, nobody, nobody)
	}
	for _, l := range find(final, "RUN ") {
		t.Errorf("final stage runs %q: it has no shell", l)
	}
	runs := strings.Join(find(build, "RUN "), "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-X main.version=${VERSION}", "ln -s ratelimitd /out/bin/ratelimit"} {
		if !strings.Contains(runs, want) {
			t.Errorf("build stage lacks %q", want)
		}
	}
	if ep := find(final, "ENTRYPOINT"); len(ep) != 1 || !strings.Contains(ep[0], `"/bin/ratelimitd"`) {
		t.Errorf("ENTRYPOINT %v, want [\"/bin/ratelimitd\"]", ep)
	}
}

// staticBinary is the binary under test in a directory nobody can write:
// the one make test built (testkit.Ratelimitd, $RATELIMITD_BIN), copied
// there, or one built now as the Dockerfile builds it (CGO_ENABLED=0,
// version stamped). It returns the path and the version stamped in it.
func staticBinary(t *testing.T) (bin, version string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "ratelimitd")
	src := os.Getenv(testkit.BinEnv)
	if src == "" {
		src = filepath.Join(t.TempDir(), "ratelimitd")
		cmd := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-imagetest", "-o", src, "./cmd/ratelimitd")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	if err := copyFile(src, bin); err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		switch {
		case s.Key == "CGO_ENABLED" && s.Value != "0":
			t.Errorf("built with CGO_ENABLED=%s, want 0 as the Dockerfile", s.Value)
		case s.Key == "-ldflags":
			if _, v, ok := strings.Cut(s.Value, "-X main.version="); ok {
				version, _, _ = strings.Cut(v, " ")
			}
		}
	}
	if version == "" {
		t.Fatalf("%s has no -X main.version in its build settings %v; build it as the Dockerfile (and make test) do", src, info.Settings)
	}
	// nobody must reach the directory but not write to it.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = os.Chmod(filepath.Dir(dir), 0o755)
		_ = os.Chmod(dir, 0o755)
	})
	return bin, version
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// asNobody runs cmd as 65534 when the test can switch users (root);
// otherwise it already runs as a non-root user.
func asNobody(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
}

func TestStaticBinaryRunsAsNobody(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux")
	}
	bin, version := staticBinary(t)

	checkStatic(t, bin)

	ver := exec.Command(bin, "--version")
	ver.Dir = filepath.Dir(bin)
	asNobody(t, ver)
	out, err := ver.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ratelimitd "+version {
		t.Fatalf("--version: %q, %v; want %q", out, err, "ratelimitd "+version)
	}

	// The rules, readable by anyone, as a ConfigMap mount is.
	root := filepath.Join(filepath.Dir(filepath.Dir(bin)), "data")
	if err := os.Chmod(filepath.Dir(filepath.Dir(bin)), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "config.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, bin)
	srv.Dir = filepath.Dir(bin)
	srv.Env = []string{
		"BACKEND_TYPE=memory", "RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		// Port 0 everywhere: the start line says where it listens, and no
		// other test can take a port between picking and binding it.
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"LOG_FORMAT=json",
	}
	logs := &testkit.SyncBuffer{}
	srv.Stdout, srv.Stderr = logs, logs
	asNobody(t, srv)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	healthy := false
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		addr := httpAddr(logs.String())
		if addr == "" {
			continue
		}
		resp, err := http.Get("http://" + addr + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				healthy = true
				break
			}
		}
	}
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitErr := srv.Wait()
	if !healthy {
		t.Fatalf("never healthy as uid %d from a read-only directory; logs:\n%s", nobody, logs.String())
	}
	if waitErr != nil {
		t.Fatalf("exit after SIGTERM: %v; logs:\n%s", waitErr, logs.String())
	}
}

// checkStatic: bin has no ELF interpreter and links no library, so it
// starts on distroless/static.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("binary has an ELF interpreter: not static, would not start on distroless/static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary links %v", libs)
	}
	f.Close()
}

// httpAddr finds the HTTP address in the start line ("ratelimitd
// listening", http: "host:port (/healthcheck, /json)").
func httpAddr(logs string) string {
	for line := range strings.SplitSeq(logs, "\n") {
		var entry struct {
			Msg  string `json:"msg"`
			HTTP string `json:"http"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "ratelimitd listening" {
			addr, _, _ := strings.Cut(entry.HTTP, " ")
			return addr
		}
	}
	return ""
}
