// Package docs checks the repository's Markdown: every relative link names
// a file that exists and, with a #fragment into a Markdown file, a heading
// of that file, so moving a section cannot leave a link behind.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	scheme  = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
	heading = regexp.MustCompile(`^#+\s+(.*)$`)
	// notSlug is what GitHub drops from a heading to make its anchor.
	notSlug = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// prose returns the lines of a Markdown file outside fenced code blocks.
func prose(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, "")
		} else {
			out = append(out, line)
		}
	}
	return out
}

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	out := map[string]bool{}
	for _, line := range prose(t, path) {
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := notSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
			out[strings.ReplaceAll(slug, " ", "-")] = true
		}
	}
	return out
}

// TestReadmeLinks checks the relative links of README.md, CONTRIBUTING.md,
// docs/ and every other Markdown file of the repository.
func TestReadmeLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found only %d Markdown files under %s", len(files), root)
	}
	cache := map[string]map[string]bool{}
	for _, file := range files {
		for n, line := range prose(t, file) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if scheme.MatchString(target) {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: %s: no such file", file, n+1, target)
					continue
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if cache[dest] == nil {
					cache[dest] = anchors(t, dest)
				}
				if !cache[dest][frag] {
					t.Errorf("%s:%d: %s: no heading with that anchor", file, n+1, target)
				}
			}
		}
	}
}
