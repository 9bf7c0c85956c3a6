package daemon

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		var out bytes.Buffer
		// A password in the environment must not show as a default.
		env := map[string]string{"REDIS_URL": "redis://:pw-Help9@127.0.0.1:1"}
		if err := Run(context.Background(), "test", []string{arg}, envOf(env), &out); err != nil {
			t.Fatalf("run %s: %v, want nil (exit 0)", arg, err)
		}
		help := out.String()
		for _, f := range serveFlags() {
			for _, want := range []string{"--" + f.name, "env " + f.env, "default " + f.def} {
				if !strings.Contains(help, want) {
					t.Errorf("%s output lacks %q:\n%s", arg, want, help)
				}
			}
		}
		if strings.Contains(help, "pw-Help9") {
			t.Errorf("%s shows the password from the environment:\n%s", arg, help)
		}
	}
}

// Every documented flag is accepted, so the help cannot list one that the
// parser lacks.
func TestEveryDocumentedFlagParses(t *testing.T) {
	values := map[string]string{"config": "dir", "backend": "memory", "redis-url": "r:1"}
	for _, f := range serveFlags() {
		v, ok := values[f.name]
		if !ok {
			v = "127.0.0.1:1"
		}
		if _, err := parseSettings([]string{"--" + f.name, v}, envOf(nil)); err != nil {
			t.Errorf("--%s %s: %v", f.name, v, err)
		}
	}
}
