package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTokensGuide: every YAML block of docs/tokens.md is an excerpt of one
// of the checked files (indentation aside), so the guide shows only what the
// tests above check.
func TestTokensGuide(t *testing.T) {
	guide := string(read(t, "../../docs/tokens.md"))
	var files []string
	err := filepath.WalkDir("tokens", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			files = append(files, string(read(t, path)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(guide, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/tokens.md has no yaml block")
	}
	for _, b := range blocks {
		found := false
		for _, f := range files {
			found = found || isExcerpt(b[1], f)
		}
		if !found {
			t.Errorf("this block of docs/tokens.md is in no file under deploy/examples/tokens:\n%s", b[1])
		}
	}
}

// isExcerpt reports whether block's lines appear consecutively in file,
// all shifted right by the same indentation.
func isExcerpt(block, file string) bool {
	want := dedent(strings.Split(strings.TrimRight(block, "\n"), "\n"))
	lines := strings.Split(file, "\n")
	for i := 0; i+len(want) <= len(lines); i++ {
		shift := indentOf(lines[i]) - indentOf(want[0])
		if shift < 0 {
			continue
		}
		prefix := strings.Repeat(" ", shift)
		ok := true
		for j, w := range want {
			l := lines[i+j]
			if strings.TrimSpace(w) == "" && strings.TrimSpace(l) == "" {
				continue
			}
			if l != prefix+w {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// dedent removes the indentation all non-blank lines share.
func dedent(lines []string) []string {
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) != "" && (common < 0 || indentOf(l) < common) {
			common = indentOf(l)
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			out[i] = l[common:]
		}
	}
	return out
}
