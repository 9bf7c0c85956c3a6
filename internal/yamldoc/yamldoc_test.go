package yamldoc_test

import (
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
)

// SyntaxError finds the line a syntax error is on, where yaml.v3 names the
// line its enclosing construct began on; internal/config's
// TestSyntaxErrorLines and pkg/middleware's TestParseErrors hold more
// cases through the readers.
func TestSyntaxError(t *testing.T) {
	data := []byte("a:\n  b:\n    c: 1\n   d: 2\n")
	var n yaml.Node
	err := yaml.Unmarshal(data, &n)
	if err == nil {
		t.Fatal("the bad indent parsed")
	}
	line, msg := yamldoc.SyntaxError(data, err)
	if line != 4 || msg != "did not find expected key" {
		t.Fatalf("SyntaxError = %d %q, want line 4 and yaml's message without its prefix (yaml said %q)", line, msg, err)
	}
}

func TestInvalidUTF8(t *testing.T) {
	if line, col, bad := yamldoc.InvalidUTF8([]byte("a: 1\nb: x\xffy\n")); !bad || line != 2 || col != 5 {
		t.Fatalf("InvalidUTF8 = %d:%d %v, want 2:5 true", line, col, bad)
	}
	if _, _, bad := yamldoc.InvalidUTF8([]byte("a: é\n")); bad {
		t.Fatal("valid UTF-8 reported bad")
	}
}

func TestJoin(t *testing.T) {
	if got := yamldoc.Join("", "domain"); got != "domain" {
		t.Errorf("Join of the document = %q", got)
	}
	if got := yamldoc.Join("http[0]", "pattern"); got != "http[0].pattern" {
		t.Errorf("Join = %q", got)
	}
}
