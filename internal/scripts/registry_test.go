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
// function and its row with its family's storage kind and its zero rate,
// each function has the parameters its family's driver passes, and nothing
// else is dispatched.
func TestDispatchMatchesRegistry(t *testing.T) {
	src := scripts.UndoSource()
	rows := regexp.MustCompile(`(?m)^  \[(\d+)\] = \{ kind = (REGS|LOG|COUNT), zero = (true|false), take = (\w+), force = (\w+), undo = (\w+), valid = (\w+), refund = (\w+) \},$`).FindAllStringSubmatch(src, -1)
	if strings.Contains(scripts.Source(), "_undo") {
		t.Error("the take script defines or refers to undo functions: it runs its whole body on every call")
	}
	if !strings.Contains(scripts.Source(), strings.ReplaceAll(rows[0][0], rows[0][6], "nil")) {
		t.Errorf("the take script's ALGS differs from the undo script's but for undo")
	}
	if len(rows) != len(algorithms.All()) {
		t.Fatalf("ALGS has %d rows, the registry %d algorithms", len(rows), len(algorithms.All()))
	}
	for i, a := range algorithms.All() {
		n, _ := strconv.Atoi(rows[i][1])
		kind, zero := "REGS", strconv.FormatBool(a.Info().CountsAtZero)
		if a.Info().Log {
			kind = "LOG"
		} else if a.Info().Counter {
			kind = "COUNT"
		}
		if algorithms.Algorithm(n) != a || rows[i][2] != kind || rows[i][3] != zero || rows[i][4] != a.String() || rows[i][5] != a.String()+"_force" ||
			rows[i][6] != a.String()+"_undo" || rows[i][7] != a.String()+"_valid" || rows[i][8] != a.String()+"_refund" {
			t.Errorf("ALGS row %d is %q, want [%d] kind %s zero %s take %s", i, rows[i][0], a, kind, zero, a)
		}
		body, err := os.ReadFile("lua/" + a.String() + ".lua")
		if err != nil {
			t.Errorf("%s: %v", a, err)
			continue
		}
		for fn, want := range luaParams(a) {
			if !regexp.MustCompile(`(?m)^local function ` + fn + `\(` + regexp.QuoteMeta(want)).Match(body) {
				t.Errorf("lua/%s.lua does not define local function %s(%s...)", a, fn, want)
			}
		}
	}
}

// luaParams is the parameters the drivers pass a's Lua functions, by
// family: a register or counter algorithm's take and valid get numbers
// (take.lua's decide_stored), a log's tables; a register algorithm's undo
// gets the stored state, the others' the key to work on (undo.lua); a
// refund gets numbers too, but a log's works on its key (refund.lua).
func luaParams(a algorithms.Algorithm) map[string]string {
	name := a.String()
	params := map[string]string{name: "lim, ", name + "_force": "lim, ", name + "_valid": "lim, ", name + "_undo": "lim, key, ch, now)",
		name + "_refund": "lim, key, h, now)"}
	if !a.Info().Log {
		params[name] = "r, p, cap, refill, debt, a, b, c, e, h, now)"
		params[name+"_force"] = "r, p, cap, refill, debt, a, b, c, e, h, now)"
		params[name+"_valid"] = "r, p, cap, refill, debt, a, b, c, now)"
		params[name+"_refund"] = "r, p, cap, refill, debt, a, b, c, e, h, now)"
	}
	if info := a.Info(); !info.Log && !info.Counter {
		params[name+"_undo"] = "lim, st, ch, now)"
	}
	return params
}
