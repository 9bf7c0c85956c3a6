package scripts

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// The take and undo scripts as one Redis 7 FUNCTION library. Loaded once per
// node (FUNCTION LOAD), its helpers and tables are defined at load, not on
// every call as EVALSHA re-runs a script's whole body. Its name and its
// functions' names carry a hash of the code: function names are global to a
// server, so a changed script must never collide with an old one still
// loaded, and a server holding this exact code is never reloaded needlessly.
var (
	libraryHash, library = buildLibrary()
	takeFunction         = "ratelimitd_take_" + libraryHash
	takesFunction        = "ratelimitd_takes_" + libraryHash
	undoFunction         = "ratelimitd_undo_" + libraryHash
)

// hashMark stands for the library's hash in its code until it is known.
const hashMark = "<HASH>"

// The functions' names in the code, before the hash is known.
const (
	takeFunction0  = "ratelimitd_take_" + hashMark
	takesFunction0 = "ratelimitd_takes_" + hashMark
	undoFunction0  = "ratelimitd_undo_" + hashMark
)

// stdGlobals are the standard globals the scripts use per call.
const stdGlobals = "math, string, struct, tonumber, tostring, type, ipairs, pairs, pcall, unpack"

func codeHash(code string) string {
	sum := sha1.Sum([]byte(code))
	return hex.EncodeToString(sum[:8])
}

// buildLibrary wraps the two scripts, each in its own block (Lua allows 200
// locals per function; each script defines about 50), with KEYS and ARGV as
// library locals that a call sets: a function gets them as arguments, and
// the scripts' helpers read them as EVAL's globals. Redis runs one call at a
// time, so sharing them between calls is safe; a call clears them so the
// library keeps nothing alive between calls.
func buildLibrary() (hash, code string) {
	var b strings.Builder
	b.WriteString("local KEYS, ARGV\n")
	// The scripts' helpers read Lua's standard globals (math, tonumber, ...)
	// on every call, and a library reads globals through its sandbox. They
	// are not there while the library loads, so the first call copies them
	// into locals that every helper below captures instead.
	b.WriteString("local function std() return " + stdGlobals + " end\n")
	b.WriteString("local " + stdGlobals + "\n")
	for _, s := range []struct {
		src, main string
		fns       [][2]string // registered name, the function it runs
	}{
		{source, "take_main", [][2]string{{takeFunction0, "take_main"}, {takesFunction0, "take_many"}}},
		{undoSource, "undo_main", [][2]string{{undoFunction0, "undo_main"}}},
	} {
		body, ok := strings.CutSuffix(s.src, "return "+s.main+"()\n")
		if !ok {
			// A driver that no longer ends so fails at load, naming it.
			body = fmt.Sprintf("error('ratelimitd: %s no longer ends with return %s()')\n", s.fns[0][0], s.main)
		}
		b.WriteString("do\n")
		b.WriteString(body)
		for _, fn := range s.fns {
			fmt.Fprintf(&b, "redis.register_function('%s', function(keys, args)\n"+
				"  if not tonumber then "+stdGlobals+" = std() end\n"+
				"  KEYS, ARGV = keys, args\n"+
				"  local out = %s()\n"+
				"  KEYS, ARGV = nil, nil\n"+
				"  return out\n"+
				"end)\n", fn[0], fn[1])
		}
		b.WriteString("end\n")
	}
	hash = codeHash(b.String())
	code = "#!lua name=ratelimitd_" + hashMark + "\n" + b.String()
	return hash, strings.ReplaceAll(code, hashMark, hash)
}

// Library is the FUNCTION library holding the take and undo functions, for
// a caller that loads it itself (FUNCTION LOAD REPLACE is idempotent).
func Library() string { return library }

// TakeFunction is the name of the take function, for FCALL with the KEYS and
// ARGV of Encode; the reply is the take script's.
func TakeFunction() string { return takeFunction }

// UndoFunction is the name of the undo function, for FCALL with the KEYS
// and ARGV of EncodeUndo.
func UndoFunction() string { return undoFunction }
