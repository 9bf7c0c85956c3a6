// Package image checks what can be checked of the container image without
// a container engine: the Dockerfile's final stage, and that the binary
// built as it builds it (CGO_ENABLED=0, version stamped; make test's, built
// once for every test that runs the binary) is static and runs as uid 65534
// from a read-only directory, as Envoy Gateway runs it.
package image

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
