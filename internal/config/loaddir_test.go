package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "config")
	writeFile(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
	writeFile(t, filepath.Join(dir, "b.yml"), "domain: b\n")
	writeFile(t, filepath.Join(dir, "notes.txt"), "domain: [not yaml we read\n")
	writeFile(t, filepath.Join(dir, "sub", "c.yaml"), "domain: c\n")
	writeFile(t, filepath.Join(dir, ".hidden.yaml"), "domain: hidden\n")
	writeFile(t, filepath.Join(root, "elsewhere", "linked.yaml"), "domain: linked\n")
	if err := os.Mkdir(filepath.Join(dir, "dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "elsewhere", "linked.yaml"), filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		opts []Option
		want []string
	}{
		{"dotfiles loaded by default, like envoyproxy", nil, []string{"a", "b", "hidden", "linked"}},
		{"dotfiles ignored", []Option{WithIgnoreDotfiles(true)}, []string{"a", "b", "linked"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadDir(dir, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Domains(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("domains = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadDirErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.yaml"), "domain: g\n")
	writeFile(t, filepath.Join(dir, "bad.yaml"), "domain: b\nbogus: 1\n")
	writeFile(t, filepath.Join(dir, ".swp.yaml"), "domain: [\n")
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}

	_, err := LoadDir(dir)
	if err == nil {
		t.Fatal("LoadDir succeeded, want errors")
	}
	for _, want := range []string{
		filepath.Join(dir, "bad.yaml") + `:2: bogus: unknown key "bogus"`,
		filepath.Join(dir, ".swp.yaml") + ":1: invalid YAML",
		filepath.Join(dir, "dangling.yaml") + ": unreadable: no such file or directory",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	_, err = LoadDir(dir, WithIgnoreDotfiles(true))
	if err == nil || strings.Contains(err.Error(), ".swp.yaml") {
		t.Errorf("with ignored dotfiles: err = %v, want errors without .swp.yaml", err)
	}

	missing := filepath.Join(dir, "nope")
	if _, err := LoadDir(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing dir: err = %v", err)
	}
}

func TestLoadDirEmpty(t *testing.T) {
	c, err := LoadDir(t.TempDir())
	if err != nil || len(c.Domains()) != 0 {
		t.Fatalf("empty dir: %v, %v", c, err)
	}
}
