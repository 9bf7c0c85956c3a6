package redisstore

import "strings"

// slotCount is the number of Redis Cluster hash slots.
const slotCount = 16384

// Slot is the Redis Cluster hash slot of key (CLUSTER KEYSLOT): CRC16 of the
// hash tag, the text between the first '{' and the next '}', when that text
// is not empty, else of the whole key. go-redis keeps its copy internal.
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return int(crc16(key)) % slotCount
}

// groupBySlot splits items 0..n-1 by the Cluster slot of key(i): each group
// in item order, the groups in the order their slot first appears (a take's
// slot groups, a return's).
func groupBySlot(n int, key func(i int) string) [][]int {
	var groups [][]int
	bySlot := make(map[int]int, 4)
	for i := range n {
		slot := Slot(key(i))
		g, ok := bySlot[slot]
		if !ok {
			g = len(groups)
			bySlot[slot] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// crc16 is CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
