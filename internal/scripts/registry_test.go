package scripts_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestDispatchMatchesRegistry walks algorithms.All() against the assembled
// script's ALGS table and the Lua files: every algorithm has its file, its
// function and its row with its state kind, and nothing else is dispatched.
func TestDispatchMatchesRegistry(t *testing.T) {
	src := scripts.UndoSource()
	rows := regexp.MustCompile(`(?m)^  \[(\d+)\] = \{ kind = (REGS|LOG), take = (\w+), undo = (\w+), valid = (\w+) \},$`).FindAllStringSubmatch(src, -1)
	if strings.Contains(scripts.Source(), "_undo") {
		t.Error("the take script defines or refers to undo functions: it runs its whole body on every call")
	}
	if !strings.Contains(scripts.Source(), strings.ReplaceAll(rows[0][0], rows[0][4], "nil")) {
		t.Errorf("the take script's ALGS differs from the undo script's but for undo")
	}
	if len(rows) != len(algorithms.All()) {
		t.Fatalf("ALGS has %d rows, the registry %d algorithms", len(rows), len(algorithms.All()))
	}
	for i, a := range algorithms.All() {
		n, _ := strconv.Atoi(rows[i][1])
		kind := map[algorithms.Family]string{algorithms.Registers: "REGS", algorithms.Log: "LOG"}[a.Family()]
		if algorithms.Algorithm(n) != a || rows[i][2] != kind || rows[i][3] != a.String() || rows[i][4] != a.String()+"_undo" || rows[i][5] != a.String()+"_valid" {
			t.Errorf("ALGS row %d is %q, want [%d] kind %s take %s", i, rows[i][0], a, kind, a)
		}
		body, err := os.ReadFile("lua/" + a.String() + ".lua")
		if err != nil {
			t.Errorf("%s: %v", a, err)
			continue
		}
		for _, fn := range []string{a.String(), a.String() + "_undo", a.String() + "_valid"} {
			if !regexp.MustCompile(`(?m)^local function ` + fn + `\(lim, `).Match(body) {
				t.Errorf("lua/%s.lua does not define local function %s(lim, ...)", a, fn)
			}
		}
	}
}
