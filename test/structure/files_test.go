package structure

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// generated is Go's marker of a generated file.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// goFiles calls fn with every hand-written Go file of the repository (the
// test modules' included), its path relative to the root.
func goFiles(t *testing.T, fn func(rel string, src []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !generated.Match(src) {
			rel, _ := filepath.Rel(root, path)
			fn(filepath.ToSlash(rel), src)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGoFilesWithin300Lines: a file a newcomer opens is read in one sitting;
// a longer one is split by concern.
func TestGoFilesWithin300Lines(t *testing.T) {
	const limit = 300
	n := 0
	goFiles(t, func(rel string, src []byte) {
		n++
		if lines := strings.Count(string(src), "\n"); lines > limit {
			t.Errorf("%s has %d lines, over %d: split it by concern", rel, lines, limit)
		}
	})
	if n < 100 {
		t.Fatalf("found %d Go files: is the root right?", n)
	}
}

// TestFunctionsWithin80Lines: a function is read without scrolling.
func TestFunctionsWithin80Lines(t *testing.T) {
	const limit = 80
	fset := token.NewFileSet()
	goFiles(t, func(rel string, src []byte) {
		f, err := parser.ParseFile(fset, rel, src, 0)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > limit {
				t.Errorf("%s: %s has %d lines, over %d", rel, fd.Name.Name, n, limit)
			}
		}
	})
}
