package daemon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// errorLine is the form `ratelimitd check` promises for every error in a
// file: file:line: field: message, without the field when the error is
// about no field (invalid YAML).
var errorLine = regexp.MustCompile(`^\S+\.ya?ml:\d+: (\S+: )?\S.*$`)

// dupDomainFiles configure one domain twice.
var dupDomainFiles = map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n", "b.yaml": "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unlimited: true}\n"}

var checkTests = []struct {
	name  string
	files map[string]string // nil: api/examples
	args  []string          // after the directory flag
	env   map[string]string
	// dirFlag names the directory flag (default --config); viaEnv
	// passes the directory in RUNTIME_* instead.
	dirFlag string
	viaEnv  bool
	wantErr bool
	// errLines is how many error lines are printed (each checked
	// against errorLine); want are substrings of the output.
	errLines int
	want     []string
}{{
	name: "the example config",
	want: []string{"OK, 1 domain(s), ", " rule(s): example ("},
}, {
	name:     "every error with file, line and field",
	files:    map[string]string{"a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "b.yaml": "domain: b\nbogus: 1\n"},
	wantErr:  true,
	errLines: 2,
	want:     []string{"a.yaml:4: descriptors[0].rate_limit.unit: unknown unit", "b.yaml:2: bogus: unknown key"},
}, {
	name:  "rate_limits: each limit is a rule",
	files: map[string]string{"l.yaml": "domain: l\ndescriptors:\n  - key: user\n    rate_limits:\n      - {unit: second, requests_per_unit: 10, name: s}\n      - {unit: day, requests_per_unit: 1000, name: d}\n"},
	want:  []string{"OK, 1 domain(s), 2 rule(s): l (2)"},
}, {
	name:     "rate_limits errors name the item",
	files:    map[string]string{"l.yaml": "domain: l\ndescriptors:\n  - key: user\n    rate_limits:\n      - {unit: second, name: s}\n      - {unit: dya, name: s}\n  - key: ip\n    rate_limit: {unit: second}\n    rate_limits: [{unit: day}]\n"},
	wantErr:  true,
	errLines: 2,
	want:     []string{"l.yaml:6: descriptors[0].rate_limits[1].unit: unknown unit \"dya\"", "l.yaml:9: descriptors[1].rate_limits: must not be set together with rate_limit"},
}, {
	name:     "duplicate domains fail without MERGE_DOMAIN_CONFIG",
	files:    dupDomainFiles,
	wantErr:  true,
	errLines: 1,
	want:     []string{"b.yaml:1: domain: duplicate domain \"d\""},
}, {
	name:  "and load with it, rules of both files counted",
	files: dupDomainFiles,
	env:   map[string]string{"MERGE_DOMAIN_CONFIG": "true"},
	want:  []string{"OK, 1 domain(s), 2 rule(s): d (2)"},
}, {
	name:  "envoyproxy's flag merges too",
	files: dupDomainFiles,
	args:  []string{"--merge_domain_configs"},
	want:  []string{"OK, 1 domain(s), 2 rule(s)"},
}, {
	name:     "the flag wins over the environment",
	files:    dupDomainFiles,
	args:     []string{"--merge_domain_configs=false"},
	env:      map[string]string{"MERGE_DOMAIN_CONFIG": "true"},
	wantErr:  true,
	errLines: 1,
}, {
	name:    "envoyproxy's -config_dir",
	files:   map[string]string{"x.yml": "domain: x\n", "y.yaml": "domain: y\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n"},
	dirFlag: "-config_dir",
	want:    []string{"OK, 2 domain(s), 1 rule(s): x (0), y (1)"},
}, {
	name:   "the directory the service would read",
	files:  map[string]string{"x.yaml": "domain: x\n"},
	viaEnv: true,
	want:   []string{"OK, 1 domain(s), 0 rule(s): x (0)"},
}, {
	name:  "RUNTIME_IGNOREDOTFILES skips an editor's swap file",
	files: map[string]string{"x.yaml": "domain: x\n", ".x.yaml": "not: [valid"},
	env:   map[string]string{"RUNTIME_IGNOREDOTFILES": "true"},
	want:  []string{"OK, 1 domain(s)"},
}, {
	name:     "which is an error otherwise",
	files:    map[string]string{"x.yaml": "domain: x\n", ".x.yaml": "not: [valid"},
	wantErr:  true,
	errLines: 1,
	want:     []string{".x.yaml:1: "},
}, {
	name:  "an empty directory is valid but says so",
	files: map[string]string{},
	want:  []string{"OK, 0 domain(s), 0 rule(s): no *.yaml or *.yml file"},
}, {
	name: "value_regex and on_store_error",
	files: map[string]string{"r.yaml": "domain: r\ndescriptors:\n  - key: path\n    value_regex: '/api/v[0-9]+/.*'\n" +
		"    rate_limit: {unit: second, requests_per_unit: 5, on_store_error: allow}\n  - key: path\n    value_regex: '/admin/.*'\n" +
		"    rate_limit: {unit: second, requests_per_unit: 1, on_store_error: deny}\n"},
	want: []string{"OK, 1 domain(s), 2 rule(s): r (2)"},
}, {
	name: "every value_regex and on_store_error error",
	files: map[string]string{"r.yaml": "domain: r\ndescriptors:\n  - key: a\n    value_regex: 'x(y'\n" +
		"  - key: b\n    value: v\n    value_regex: v.*\n" +
		"  - key: c\n    value_regex: z+\n  - key: c\n    value_regex: z+\n" +
		"  - key: d\n    rate_limit: {unit: second, requests_per_unit: 1, on_store_error: open}\n"},
	wantErr:  true,
	errLines: 4,
	want: []string{
		"r.yaml:4: descriptors[0].value_regex: invalid RE2 regular expression",
		"r.yaml:7: descriptors[1].value_regex: set either value (line 6) or value_regex, not both",
		`r.yaml:11: descriptors[3].value_regex: duplicate value_regex "z+" for key "c" (first at `, `r.yaml:8)`,
		`r.yaml:13: descriptors[4].rate_limit.on_store_error: want unavailable, allow, deny or local, got string "open"`,
	},
}, {
	name:  "settings check has no use for are not read, even invalid ones",
	files: map[string]string{"x.yaml": "domain: x\n"},
	env:   map[string]string{"BACKEND_TYPE": "redis", "REDIS_TIMEOUT": "soon"},
	want:  []string{"OK, 1 domain(s)"},
}}

func TestCheck(t *testing.T) {
	for _, tt := range checkTests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "api", "examples")
			if tt.files != nil {
				dir = writeConfigDir(t, tt.files)
			}
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			var args []string
			switch {
			case tt.viaEnv:
				env["RUNTIME_ROOT"], env["RUNTIME_APPDIRECTORY"] = filepath.Dir(dir), filepath.Base(dir)
			case tt.dirFlag != "":
				args = []string{tt.dirFlag, dir}
			default:
				args = []string{"--config", dir}
			}
			var out bytes.Buffer
			err := runCheck(append(args, tt.args...), envOf(env), &out)
			if tt.wantErr != (err != nil) {
				t.Fatalf("err = %v, wantErr %v; output:\n%s", err, tt.wantErr, out.String())
			}
			if tt.wantErr && !errors.Is(err, errCheckFailed) {
				t.Fatalf("err = %v, want errCheckFailed", err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if tt.wantErr {
				// A finding is a single line: count them.
				if len(lines) != tt.errLines {
					t.Errorf("%d error lines, want %d:\n%s", len(lines), tt.errLines, out.String())
				}
				for _, l := range lines {
					if !errorLine.MatchString(l) {
						t.Errorf("error line %q is not file:line: field: message", l)
					}
				}
			} else if len(lines) != 1 || !strings.HasPrefix(lines[0], dir+": OK, ") {
				t.Errorf("want one summary line starting %q, got:\n%s", dir+": OK, ", out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestCheckUsage(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // "" for success
	}{
		{"help is not a failure", []string{"-h"}, nil, ""},
		{"unknown flag", []string{"--strict"}, nil, "flag provided but not defined"},
		{"stray argument", []string{"--config", "x", "y"}, nil, `unexpected argument "y"`},
		{"bad boolean in the environment", nil, map[string]string{"MERGE_DOMAIN_CONFIG": "maybe"}, "MERGE_DOMAIN_CONFIG"},
		{"missing directory", []string{"--config", "/nonexistent/ratelimitd"}, nil, "config check failed: 1 error(s) in /nonexistent/ratelimitd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runCheck(tt.args, envOf(tt.env), &out)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err = %v; output:\n%s", err, out.String())
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want it to contain %q; output:\n%s", err, tt.wantErr, out.String())
			}
		})
	}
}

// run dispatches `check` before reading the service's settings.
func TestRunDispatchesCheck(t *testing.T) {
	dir := writeConfigDir(t, map[string]string{"x.yaml": "domain: x\n"})
	var out bytes.Buffer
	env := map[string]string{"REDIS_TIMEOUT": "soon"} // would fail the service's start
	if err := Run(t.Context(), "test", []string{"check", "--config", dir}, envOf(env), &out); err != nil {
		t.Fatalf("run check: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "OK, 1 domain(s)") {
		t.Fatalf("run check printed:\n%s", out.String())
	}
}

func writeConfigDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
