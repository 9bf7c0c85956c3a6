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
// function and its row with its state kind, each function has the
// parameters its family's driver passes, and nothing else is dispatched.
func TestDispatchMatchesRegistry(t *testing.T) {
	src := scripts.UndoSource()
	rows := regexp.MustCompile(`(?m)^  \[(\d+)\] = \{ kind = (REGS|LOG), take = (\w+), force = (\w+), undo = (\w+), valid = (\w+) \},$`).FindAllStringSubmatch(src, -1)
	if strings.Contains(scripts.Source(), "_undo") {
		t.Error("the take script defines or refers to undo functions: it runs its whole body on every call")
	}
	if !strings.Contains(scripts.Source(), strings.ReplaceAll(rows[0][0], rows[0][5], "nil")) {
		t.Errorf("the take script's ALGS differs from the undo script's but for undo")
	}
	if len(rows) != len(algorithms.All()) {
		t.Fatalf("ALGS has %d rows, the registry %d algorithms", len(rows), len(algorithms.All()))
	}
	for i, a := range algorithms.All() {
		n, _ := strconv.Atoi(rows[i][1])
		kind := map[algorithms.Family]string{algorithms.Registers: "REGS", algorithms.Log: "LOG"}[a.Family()]
		if algorithms.Algorithm(n) != a || rows[i][2] != kind || rows[i][3] != a.String() || rows[i][4] != a.String()+"_force" ||
			rows[i][5] != a.String()+"_undo" || rows[i][6] != a.String()+"_valid" {
			t.Errorf("ALGS row %d is %q, want [%d] kind %s take %s", i, rows[i][0], a, kind, a)
		}
		body, err := os.ReadFile("lua/" + a.String() + ".lua")
		if err != nil {
			t.Errorf("%s: %v", a, err)
			continue
		}
		// The driver calls a register algorithm's take and valid with
		// numbers (take.lua's decide_stored), a log's with tables; every
		// undo gets tables.
		params := map[string]string{a.String(): "lim, ", a.String() + "_force": "lim, ", a.String() + "_valid": "lim, ", a.String() + "_undo": "lim, "}
		if a.Family() == algorithms.Registers {
			params[a.String()] = "r, p, cap, refill, debt, a, b, c, e, h, now)"
			params[a.String()+"_force"] = "r, p, cap, refill, debt, a, b, c, e, h, now)"
			params[a.String()+"_valid"] = "r, p, cap, refill, debt, a, b, c, now)"
		}
		for fn, want := range params {
			if !regexp.MustCompile(`(?m)^local function ` + fn + `\(` + regexp.QuoteMeta(want)).Match(body) {
				t.Errorf("lua/%s.lua does not define local function %s(%s...)", a, fn, want)
			}
		}
	}
}
