package structure

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test modules (api/schema, deploy/examples, deploy/monitoring) build
// ratelimitd's packages as a dependency. A module both go.mod files require
// at different versions changes the build ID of everything above it (one
// newer golang.org/x/net recompiles gRPC and every ratelimitd package), so
// a fresh make test compiled most of the tree a third time: keep them equal.
func TestTestModulesShareVersions(t *testing.T) {
	main := requires(t, filepath.Join(root, "go.mod"))
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" || filepath.Dir(path) == filepath.Clean(root) {
			return nil
		}
		n++
		rel, _ := filepath.Rel(root, path)
		for mod, v := range requires(t, path) {
			if want, ok := main[mod]; ok && v != want {
				// The test module's is the higher: its build list includes the root's.
				t.Errorf("%s requires %s %s, go.mod %s: run go get %s@%s in the root, then go mod tidy in both",
					rel, mod, v, want, mod, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("found no test module: is the root right?")
	}
}

// requires reads the module versions a go.mod requires (its require lines,
// in a block or not).
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	block := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "require (":
			block = true
			continue
		case block && line == ")":
			block = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !block:
			continue
		}
		if fields := strings.Fields(line); len(fields) >= 2 {
			out[fields[0]] = fields[1]
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
