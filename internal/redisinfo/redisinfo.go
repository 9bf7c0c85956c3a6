// Package redisinfo reads the Redis INFO fields that ratelimitd's tests and
// benchmark judge it by: per-command call counts and times, and single
// fields such as total_reads_processed.
package redisinfo

import (
	"strconv"
	"strings"
)

// CommandStat is one line of INFO commandstats.
type CommandStat struct {
	Calls int64
	Usec  int64 // time inside the command, scripts' own commands included
}

// UsecPerCall is Redis's usec_per_call.
func (s CommandStat) UsecPerCall() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Usec) / float64(s.Calls)
}

// CommandStats parses INFO commandstats into command name (without the
// cmdstat_ prefix; a subcommand as "function|load") -> its stat.
func CommandStats(info string) map[string]CommandStat {
	stats := map[string]CommandStat{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var s CommandStat
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.Calls = n
			case "usec":
				s.Usec = n
			}
		}
		stats[cmd] = s
	}
	return stats
}

// ScriptCommands are the commands a decision can run its script with.
var ScriptCommands = []string{"evalsha", "eval", "fcall", "fcall_ro", "evalsha_ro", "eval_ro"}

// ScriptCalls is how many script calls stats counts, over ScriptCommands.
func ScriptCalls(stats map[string]CommandStat) int64 {
	var n int64
	for _, c := range ScriptCommands {
		n += stats[c].Calls
	}
	return n
}

// Field is the value of one "name:value" line of any INFO section.
func Field(info, name string) (string, bool) {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v, true
		}
	}
	return "", false
}
