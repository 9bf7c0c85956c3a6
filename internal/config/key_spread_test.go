package config

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// crc16 is Redis Cluster's key hash (CRC16-CCITT/XMODEM), written out here
// so this package's test does not lean on the store's copy.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func keySlot(key string) int {
	if tag, ok := clusterTag(key); ok {
		key = tag
	}
	return int(crc16(key)) % 16384
}

// One rule's counters must spread over a Cluster's masters: 1000 distinct
// values over the three slot ranges `redis-cli --cluster create` gives three
// masters, each within 20% of a third.
func TestKeySpreadOverClusterSlots(t *testing.T) {
	if got := keySlot("123456789"); got != 12739 {
		t.Fatalf("crc16 check value: slot %d, want 12739 (CLUSTER KEYSLOT 123456789)", got)
	}
	ranges := [3][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	tests := []struct {
		name  string
		rule  *Rule
		entry func(i int) []Entry
	}{
		{"user ids", ruleFor("edge", algorithms.FixedWindow, time.Minute),
			func(i int) []Entry { return []Entry{{"user_id", fmt.Sprintf("user-%d", i)}} }},
		{"addresses under a path", ruleFor("edge", algorithms.TokenBucket, time.Second),
			func(i int) []Entry {
				return []Entry{{"path", "/api"}, {"remote_address", fmt.Sprintf("10.0.%d.%d", i/256, i%256)}}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := KeyBuilder{Prefix: "rl:"}
			var per [3]int
			for i := range 1000 {
				slot := keySlot(b.Key(tt.rule, tt.entry(i)))
				for m, r := range ranges {
					if slot >= r[0] && slot <= r[1] {
						per[m]++
					}
				}
			}
			t.Logf("1000 counters over 3 masters: %v", per)
			for m, n := range per {
				if n < 267 || n > 400 {
					t.Errorf("master %d holds %d of 1000 counters, want 333 +-20%% (%v)", m, n, per)
				}
			}
		})
	}
}
