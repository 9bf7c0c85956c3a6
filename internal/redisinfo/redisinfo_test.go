package redisinfo

import "testing"

const sample = "# Commandstats\r\n" +
	"cmdstat_fcall:calls=25,usec=890,usec_per_call=35.60,rejected_calls=0,failed_calls=1\r\n" +
	"cmdstat_evalsha:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_function|load:calls=2,usec=400,usec_per_call=200.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
	"# Stats\r\ntotal_reads_processed:1234\r\n"

func TestCommandStats(t *testing.T) {
	stats := CommandStats(sample)
	want := map[string]CommandStat{
		"fcall": {25, 890}, "evalsha": {3, 30}, "function|load": {2, 400}, "info": {7, 70},
	}
	if len(stats) != len(want) {
		t.Fatalf("parsed %v, want %v", stats, want)
	}
	for name, w := range want {
		if stats[name] != w {
			t.Errorf("%s = %+v, want %+v", name, stats[name], w)
		}
	}
	if got := ScriptCalls(stats); got != 28 {
		t.Errorf("ScriptCalls = %d, want 28 (fcall + evalsha)", got)
	}
	if got := stats["fcall"].UsecPerCall(); got != 35.6 {
		t.Errorf("UsecPerCall = %v, want 35.6", got)
	}
	if got := (CommandStat{}).UsecPerCall(); got != 0 {
		t.Errorf("UsecPerCall of no calls = %v, want 0", got)
	}
	if v, ok := Field(sample, "total_reads_processed"); !ok || v != "1234" {
		t.Errorf("Field = %q %v, want 1234", v, ok)
	}
	if _, ok := Field(sample, "total_reads"); ok {
		t.Error("Field matched a prefix of another field's name")
	}
}
