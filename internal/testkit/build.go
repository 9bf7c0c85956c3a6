package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// BinEnv names the ratelimitd binary make test builds once, for every test
// that runs the binary (test/integration, test/image) to use instead of
// building its own.
const BinEnv = "RATELIMITD_BIN"

// ToolsEnv names the directory where make test has built the other
// binaries the tests run (the load drivers, grpcurl) before the tests
// start, so that their build does not hold up the integration tests.
const ToolsEnv = "RATELIMITD_TOOLS"

// Build builds the main packages pkgs into dir with CGO_ENABLED=0, in one
// go command: the configuration of the container image, and the one make
// test vets in, so that every package compiles once for both (and once
// more for the race detector). pkgs are import paths or paths relative to
// the calling test's directory.
func Build(dir string, pkgs ...string) error {
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if _, set := os.LookupEnv("GOGC"); !set {
		// As make test builds: the compiler and linker spend less CPU.
		cmd.Env = append(cmd.Env, "GOGC=400")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %w\n%s", pkgs, err, out)
	}
	return nil
}

// Ratelimitd is the binary the tests run: $RATELIMITD_BIN when make test
// has built it, else ratelimitd built now into dir from root (the module's
// directory, relative to the calling test's).
func Ratelimitd(dir, root string) (string, error) {
	if bin := os.Getenv(BinEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s: %w", BinEnv, err)
		}
		return bin, nil
	}
	if err := Build(dir, root+"/cmd/ratelimitd"); err != nil {
		return "", err
	}
	return filepath.Join(dir, "ratelimitd"), nil
}

// Tool is the binary of the main package pkg: the one in $RATELIMITD_TOOLS
// when make test has built it there, else one built now into dir.
func Tool(dir, pkg string) (string, error) {
	name := path.Base(pkg)
	if tools := os.Getenv(ToolsEnv); tools != "" {
		bin := filepath.Join(tools, name)
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s: %w", ToolsEnv, err)
		}
		return bin, nil
	}
	if err := Build(dir, pkg); err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}
