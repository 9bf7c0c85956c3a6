package algorithms

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	year := 365 * 24 * time.Hour
	tests := map[string]struct {
		lim     Limit
		wantErr string // "" = valid
	}{
		"fixed window":              {Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Second}, ""},
		"zero requests":             {Limit{Algorithm: GCRA, Period: time.Second}, ""},
		"max values":                {Limit{Algorithm: SlidingWindow, Requests: MaxCount, Period: MaxPeriod}, ""},
		"token bucket extras":       {Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Second, RefillInterval: time.Second, MaxDebt: 5}, ""},
		"1e9 per year":              {Limit{Algorithm: TokenBucket, Requests: 1e9, Period: year, Burst: 1e9}, ""},
		"unset algorithm":           {Limit{Requests: 1, Period: time.Second}, "algorithm is unset"},
		"unknown algorithm":         {Limit{Algorithm: 42, Requests: 1, Period: time.Second}, "algorithm is unset or unknown (42)"},
		"zero period":               {Limit{Algorithm: FixedWindow, Requests: 1}, "period 0s is outside"},
		"period too long":           {Limit{Algorithm: FixedWindow, Requests: 1, Period: MaxPeriod + time.Second}, "is outside"},
		"sub-µs period":             {Limit{Algorithm: FixedWindow, Requests: 1, Period: time.Second + 1}, "not a whole number of microseconds"},
		"requests too big":          {Limit{Algorithm: FixedWindow, Requests: MaxCount + 1, Period: time.Second}, "at most"},
		"burst too big":             {Limit{Algorithm: GCRA, Requests: 1, Burst: MaxCount + 1, Period: time.Second}, "at most"},
		"refill longer than period": {Limit{Algorithm: TokenBucket, Requests: 1, Period: time.Second, RefillInterval: 2 * time.Second}, "refill_interval"},
		"negative refill":           {Limit{Algorithm: TokenBucket, Requests: 1, Period: time.Second, RefillInterval: -time.Second}, "refill_interval"},
		"max_debt on gcra":          {Limit{Algorithm: GCRA, Requests: 1, Period: time.Second, MaxDebt: 1}, "token_bucket only"},
		"refill on fixed window":    {Limit{Algorithm: FixedWindow, Requests: 1, Period: time.Second, RefillInterval: time.Millisecond}, "token_bucket only"},
		"bucket too slow to fill":   {Limit{Algorithm: LeakyBucket, Requests: 1, Period: year, Burst: 51}, "takes longer than"},
		"debt too slow to repay":    {Limit{Algorithm: TokenBucket, Requests: 1, Period: year, Burst: 10, MaxDebt: 41}, "takes longer than"},
		"burst on sliding_log":      {Limit{Algorithm: SlidingLog, Requests: 1, Period: year, Burst: MaxCount}, "burst applies to token_bucket, leaky_bucket and gcra only, not sliding_log"},
		"burst on fixed_window":     {Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Second, Burst: 5}, "burst applies to"},
		"burst on sliding_window":   {Limit{Algorithm: SlidingWindow, Requests: 10, Period: time.Second, Burst: 10}, "burst applies to"},
		"burst on leaky_bucket":     {Limit{Algorithm: LeakyBucket, Requests: 10, Period: time.Second, Burst: 5}, ""},
		"burst on gcra":             {Limit{Algorithm: GCRA, Requests: 10, Period: time.Second, Burst: 5}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.lim.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("valid, want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// The options Validate refuses follow the registry, not a list of names.
func TestValidateOptionsFollowRegistry(t *testing.T) {
	for _, a := range All() {
		t.Run(a.String(), func(t *testing.T) {
			burst := Limit{Algorithm: a, Requests: 10, Period: time.Second, Burst: 5}
			if err := burst.Validate(); (err == nil) != a.Info().Bucket {
				t.Errorf("burst: Validate() = %v, bucket %v", err, a.Info().Bucket)
			}
			for name, lim := range map[string]Limit{
				"refill_interval": {Algorithm: a, Requests: 10, Period: time.Second, RefillInterval: time.Millisecond},
				"max_debt":        {Algorithm: a, Requests: 10, Period: time.Second, MaxDebt: 1},
			} {
				if err := lim.Validate(); (err == nil) != a.Info().Stepped {
					t.Errorf("%s: Validate() = %v, stepped %v", name, err, a.Info().Stepped)
				}
			}
		})
	}
}

func TestNamesOf(t *testing.T) {
	all := All()
	if len(all) < 3 {
		t.Fatalf("%d algorithms: too few to list", len(all))
	}
	a, b, c, z := all[0], all[1], all[2], all[len(all)-1]
	tests := map[string]struct {
		has  func(Algorithm) bool
		want string
	}{
		"none":  {func(Algorithm) bool { return false }, ""},
		"one":   {func(x Algorithm) bool { return x == b }, b.String()},
		"two":   {func(x Algorithm) bool { return x == a || x == z }, a.String() + " and " + z.String()},
		"three": {func(x Algorithm) bool { return x == c || x == a || x == b }, a.String() + ", " + b.String() + " and " + c.String()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := namesOf(tc.has); got != tc.want {
				t.Errorf("namesOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// Every valid limit keeps the times it stores under 2^53 µs.
func TestBoundsFitBinary64(t *testing.T) {
	if maxUnixMicro+2*MaxPeriod.Microseconds() >= 1<<53 {
		t.Fatal("maxUnixMicro + 2*MaxPeriod reaches 2^53")
	}
	if maxUnixMicro < time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() {
		t.Fatalf("maxUnixMicro is %s", time.UnixMicro(maxUnixMicro).UTC())
	}
	if MaxPeriod.Microseconds() >= 1<<52 {
		t.Fatal("mulAddDivMod's Lua twin needs divisors below 2^52")
	}
}
