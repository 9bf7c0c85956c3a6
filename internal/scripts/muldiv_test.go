package scripts_test

import (
	"context"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
)

// muldivDriver calls math.lua's muldiv on every (a, b, c, d) in ARGV and
// returns q, r pairs. Arguments travel as decimal strings: every value is an
// integer below 2^53, exact in binary64.
const muldivDriver = `
local out = {}
for i = 1, #ARGV, 4 do
  local q, r = muldiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]))
  out[#out + 1] = int(q)
  out[#out + 1] = int(r)
end
return out
`

// TestLuaMulDiv checks the Lua muldiv against math/big on edge and random
// values inside its contract: a, b, c < 2^53, 1 <= d < 2^52, quotient < 2^53.
func TestLuaMulDiv(t *testing.T) {
	rdb := newRedis(t)
	const two53 = 1 << 53
	edges := []uint64{0, 1, 2, 3, 999, 1000, 1e6, 1e9, 1<<40 - 1, 1 << 40, 1 << 41, 1<<51 - 1, 1 << 51, 1<<52 - 1, 1 << 52, two53 - 1, 31_536_000_000_000, 1_576_800_000_000_000}
	var cases [][4]uint64
	for _, a := range edges {
		for _, b := range edges {
			for _, c := range []uint64{0, 1, two53 - 1} {
				for _, d := range edges[1:] {
					cases = append(cases, [4]uint64{a, b, c, d})
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20_000 {
		d := max(rng.Uint64N(1<<52)>>rng.UintN(52), 1)
		a := rng.Uint64N(two53) >> rng.UintN(53)
		b := rng.Uint64N(two53) >> rng.UintN(53)
		c := rng.Uint64N(two53) >> rng.UintN(53)
		cases = append(cases, [4]uint64{a, b, c, d})
	}
	var valid [][4]uint64
	var want []*big.Int
	for _, tc := range cases {
		if tc[3] >= 1<<52 {
			continue
		}
		n := new(big.Int).Mul(new(big.Int).SetUint64(tc[0]), new(big.Int).SetUint64(tc[1]))
		n.Add(n, new(big.Int).SetUint64(tc[2]))
		q, r := new(big.Int).QuoRem(n, new(big.Int).SetUint64(tc[3]), new(big.Int))
		if q.Cmp(big.NewInt(two53)) >= 0 {
			continue
		}
		valid = append(valid, tc)
		want = append(want, q, r)
	}
	slow := 0
	for _, tc := range valid {
		if new(big.Int).Mul(new(big.Int).SetUint64(tc[0]), new(big.Int).SetUint64(tc[1])).Cmp(big.NewInt(two53)) >= 0 {
			slow++
		}
	}
	if slow < 1000 {
		t.Fatalf("only %d cases take the slow path", slow)
	}
	src := scripts.MathSource + muldivDriver
	const chunk = 2000
	for start := 0; start < len(valid); start += chunk {
		part := valid[start:min(start+chunk, len(valid))]
		args := make([]any, 0, 4*len(part))
		for _, tc := range part {
			for _, v := range tc {
				args = append(args, strconv.FormatUint(v, 10))
			}
		}
		got, err := rdb.Eval(context.Background(), src, nil, args...).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		for i, tc := range part {
			wq, wr := want[2*(start+i)], want[2*(start+i)+1]
			if got[2*i] != wq.String() || got[2*i+1] != wr.String() {
				t.Fatalf("muldiv(%d, %d, %d, %d) = %s, %s; want %s, %s", tc[0], tc[1], tc[2], tc[3], got[2*i], got[2*i+1], wq, wr)
			}
		}
	}
	t.Logf("%d cases, %d on the slow path", len(valid), slow)
}
