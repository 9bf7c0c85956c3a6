package image

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
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
