package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		env     map[string]string
		wantErr bool
		want    []string
	}{{
		name:  "the example config",
		files: nil, // uses api/examples
		want:  []string{"OK, 1 domain(s): example"},
	}, {
		name:    "every error with file, line and field",
		files:   map[string]string{"a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "b.yaml": "domain: b\nbogus: 1\n"},
		wantErr: true,
		want:    []string{"a.yaml:4", "unit", "b.yaml:2", "bogus"},
	}, {
		name:    "duplicate domains fail without MERGE_DOMAIN_CONFIG",
		files:   map[string]string{"a.yaml": "domain: d\n", "b.yaml": "domain: d\n"},
		wantErr: true,
		want:    []string{"d"},
	}, {
		name:  "and pass with it",
		files: map[string]string{"a.yaml": "domain: d\n", "b.yaml": "domain: d\n"},
		env:   map[string]string{"MERGE_DOMAIN_CONFIG": "true"},
		want:  []string{"OK, 1 domain(s): d"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "api", "examples")
			if tt.files != nil {
				dir = t.TempDir()
				for name, body := range tt.files {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			var out bytes.Buffer
			err := runCheck([]string{"--config", dir}, envOf(tt.env), &out)
			if tt.wantErr != (err != nil) {
				t.Fatalf("err = %v, wantErr %v; output:\n%s", err, tt.wantErr, out.String())
			}
			if tt.wantErr && !errors.Is(err, errCheckFailed) {
				t.Fatalf("err = %v, want errCheckFailed", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
