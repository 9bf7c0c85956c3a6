package algorithms_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

const root = "../.."

// TestNewAlgorithmFiles holds docs/algorithms.md's "A new algorithm": the
// number of files it states is its table's, at most 8; every file there
// exists (for every algorithm where it names one), and every test it names
// exists.
func TestNewAlgorithmFiles(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "docs", "algorithms.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	m := regexp.MustCompile(`A new algorithm touches (\d+) files, each enforced by a test`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal(`docs/algorithms.md no longer says "A new algorithm touches N files, each enforced by a test"`)
	}
	stated, _ := strconv.Atoi(m[1])
	rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| [^|]+ \\| `(\\w+)` \\|$").FindAllStringSubmatch(doc[strings.Index(doc, m[0]):], -1)
	if len(rows) != stated || stated > 8 {
		t.Fatalf("docs/algorithms.md states %d files and lists %d: want them equal, at most 8", stated, len(rows))
	}
	for _, row := range rows {
		path, test := row[1], row[2]
		for _, a := range algorithms.All() {
			p := strings.ReplaceAll(path, "<name>", a.String())
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s: %v", a, err)
			}
		}
		if !definedInTree(t, test) {
			t.Errorf("%s: no func %s in the tree enforces it", path, test)
		}
	}
}

// definedInTree reports whether some Go file of the tree defines func name.
func definedInTree(t *testing.T, name string) bool {
	def := "func " + name + "("
	found := false
	walkSources(t, func(path, text string) {
		if strings.HasSuffix(path, ".go") && (strings.HasPrefix(text, def) || strings.Contains(text, "\n"+def)) {
			found = true
		}
	})
	return found
}

// walkSources calls fn with every Go and Lua file of the tree (but the
// other modules' dependencies and testdata) and its text.
func walkSources(t *testing.T, fn func(path, text string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".lua")) {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fn(filepath.ToSlash(rel), string(raw))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// byNameAllowed are the places that may decide by an algorithm's name, and
// why each stays right for an algorithm added later.
var byNameAllowed = map[string]string{
	"internal/ratelimit/respond.go":       "envoyproxy's whole-second duration_until_reset of its fixed window; any other algorithm keeps µs",
	"internal/config/lease.go":            "sliding_log's own reason in the refusal of lease: true; any other algorithm that cannot lease gets the general one",
	"pkg/store/localcache/entry.go":       "a fixed window's denial lasts until its window ends; any other algorithm's lasts its exact RetryAfter",
	"internal/scripts/lua/take_fixed.lua": "fixed_window's own fast path; every other op goes to the general paths",
}

// TestNoAlgorithmDecidedByName scans the tree for code that decides by an
// algorithm's constant, where a new algorithm would have to be added (a
// switch, a comparison, a list), outside the registry and byNameAllowed.
// Tests may compare with one algorithm (a test of its behaviour), but not
// list or switch over several (a generator: it derives them from All()).
func TestNoAlgorithmDecidedByName(t *testing.T) {
	consts := algorithmConsts(t)
	c := `(?:algorithms\.)?(?:` + strings.Join(consts, "|") + `)\b`
	decides := regexp.MustCompile(`case\s+` + c + `|[=!]=\s*` + c + `|Algorithm\{\s*` + c)
	several := regexp.MustCompile(`case\s+` + c + `\s*,|[=!]=\s*` + c + `.*(?:\|\||&&).*[=!]=\s*` + c + `|Algorithm\{\s*` + c)
	var lua []string
	for _, n := range algorithms.Names() {
		lua = append(lua, n)
	}
	luaName := regexp.MustCompile(`\b(` + strings.Join(lua, "|") + `)\b|\bFIXED_WINDOW\b`)
	walkSources(t, func(path, text string) {
		if path == "pkg/algorithms/registry.go" || byNameAllowed[path] != "" {
			return
		}
		for i, line := range strings.Split(text, "\n") {
			// The regexps below are slow under the race detector: most
			// lines name no algorithm at all.
			if !mentionsAny(line, consts) && !mentionsAny(line, lua) && !strings.Contains(line, "FIXED_WINDOW") {
				continue
			}
			code, _, _ := strings.Cut(line, "//")
			var bad bool
			switch {
			case strings.HasSuffix(path, ".lua"):
				code, _, _ = strings.Cut(line, "--")
				own := strings.TrimSuffix(filepath.Base(path), ".lua")
				for _, m := range luaName.FindAllString(code, -1) {
					bad = bad || m != own
				}
			case strings.HasSuffix(path, "_test.go"):
				bad = several.MatchString(code)
			default:
				bad = decides.MatchString(code)
			}
			if bad {
				t.Errorf("%s:%d decides by an algorithm's name: %s", path, i+1, strings.TrimSpace(line))
			}
		}
	})
}

func mentionsAny(line string, names []string) bool {
	for _, n := range names {
		if strings.Contains(line, n) {
			return true
		}
	}
	return false
}

// algorithmConsts are the algorithms' constants, read from registry.go's
// const block, in order.
func algorithmConsts(t *testing.T) []string {
	raw, err := os.ReadFile("registry.go")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)const \(\n\t(\w+) Algorithm = iota \+ 1\n(.*?)\)`).FindSubmatch(raw)
	if block == nil {
		t.Fatal("registry.go has no const block of Algorithm = iota + 1")
	}
	consts := []string{string(block[1])}
	for _, m := range regexp.MustCompile(`(?m)^\t(\w+)$`).FindAllSubmatch(block[2], -1) {
		consts = append(consts, string(m[1]))
	}
	if len(consts) != len(algorithms.All()) {
		t.Fatalf("registry.go declares %v, the registry has %d algorithms", consts, len(algorithms.All()))
	}
	return consts
}
