package scripts_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/procstat"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// BenchmarkAgainstBaseline weighs this commit's library against another
// commit's by redis-server CPU per decision, on two servers fed the same
// fixed_window decisions (BenchmarkMergedTakes' limit and keys) slice by
// slice, in turn (A B, then B A): on a shared machine whose speed moves by a
// tenth between runs, only CPU spent side by side compares (two runs of one
// library agree within 2-3% at -benchtime 80x). "merged" sends mergedTakes
// takes to one FCALL of the takes function from 4 callers, as the coalescer
// does under load; "alone" sends each decision as its own FCALL of the take
// function from one caller, as a lightly loaded service does. Each b.N is
// one slice on each server; use -benchtime 60x or more (CPU counts in 10 ms
// ticks).
//
// RATELIMITD_WRITE_LIBRARY=file writes this commit's library (run it at the
// baseline commit); RATELIMITD_BASELINE_LIBRARY=file loads that one. Or it
// names one of leastLibrary's: "least", the least any library can do for
// these takes, or "least-hash", the same on one hash per window.
func BenchmarkAgainstBaseline(b *testing.B) {
	if path := os.Getenv("RATELIMITD_WRITE_LIBRARY"); path != "" {
		if err := os.WriteFile(path, []byte(scripts.Library()), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	path := os.Getenv("RATELIMITD_BASELINE_LIBRARY")
	var code string
	var err error
	switch path {
	case "":
		b.Skip("RATELIMITD_BASELINE_LIBRARY names no baseline library")
	case "least":
		code, err = leastLibrary("strings")
	case "least-hash":
		code, err = leastLibrary("hash")
	default:
		var c []byte
		c, err = os.ReadFile(path)
		code = string(c)
	}
	if err != nil {
		b.Fatal(err)
	}
	this := startLibrary(b, scripts.Library())
	base := startLibrary(b, code)
	for _, mode := range []string{"merged", "alone"} {
		for _, n := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/desc%d", mode, n), func(b *testing.B) {
				var cpu [2]time.Duration
				decisions := 0
				for slice := range b.N {
					sides := []*librarySide{this, base}
					if slice%2 == 1 {
						sides = []*librarySide{base, this}
					}
					for _, s := range sides {
						spent, made, err := s.slice(mode, n, uint64(slice))
						if err != nil {
							b.Fatal(err)
						}
						if s == this {
							cpu[0] += spent
							decisions += made
						} else {
							cpu[1] += spent
						}
					}
				}
				b.ReportMetric(float64(cpu[0].Microseconds())/float64(decisions), "this-µs/decision")
				b.ReportMetric(float64(cpu[1].Microseconds())/float64(decisions), "base-µs/decision")
				b.ReportMetric(float64(cpu[0])/float64(max(cpu[1], 1)), "this/base")
			})
		}
	}
}

// librarySide is one library loaded into its own redis-server.
type librarySide struct {
	rdb         *redis.Client
	pid         int
	take, takes string // its functions' names
	noDistinct  bool   // it predates MergeTakes' DISTINCT marker
}

var libraryFunctions = regexp.MustCompile(`'(ratelimitd_takes?_[0-9a-f]+)'`)

// functionNames are the names of the take and takes functions code registers.
func functionNames(code string) (take, takes string) {
	for _, m := range libraryFunctions.FindAllStringSubmatch(code, -1) {
		if m[1][len("ratelimitd_take")] == 's' {
			takes = m[1]
		} else {
			take = m[1]
		}
	}
	return take, takes
}

func startLibrary(b *testing.B, code string) *librarySide {
	rdb, pid := benchRedis(b, 8, code)
	// A library from before DISTINCT would read the marker as a take.
	s := &librarySide{rdb: rdb, pid: pid, noDistinct: !strings.Contains(code, "-- DISTINCT")}
	s.take, s.takes = functionNames(code)
	if s.take == "" || s.takes == "" {
		b.Fatal("the library registers no take or takes function")
	}
	return s
}

// slice makes one slice's decisions of n descriptors in mode and returns
// the server's CPU time over it and how many decisions it made.
func (s *librarySide) slice(mode string, n int, seed uint64) (time.Duration, int, error) {
	callers, calls, takes := 4, 150, mergedTakes
	if mode == "alone" {
		callers, calls, takes = 1, 600, 1
	}
	before, err := procstat.CPUTime(s.pid)
	if err != nil {
		return 0, 0, err
	}
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), seed))
			for range calls {
				if errs[c] = s.call(rng, mode, n, takes); errs[c] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	after, err := procstat.CPUTime(s.pid)
	return after - before, callers * calls * takes, errors.Join(append(errs, err)...)
}

// call sends takes decisions of n descriptors: one FCALL of the take
// function (alone) or of the takes function (merged).
func (s *librarySide) call(rng *rand.Rand, mode string, n, takes int) error {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Period: time.Second}
	calls := make([][]any, takes)
	for i := range calls {
		ops := make([]algorithms.Op, n)
		for d := range ops {
			ops[d] = algorithms.Op{Key: "bench:{d" + strconv.Itoa(d) + "}:" + strconv.Itoa(rng.IntN(mergedKeys)), Limit: lim, Hits: 1}
		}
		call, err := takeCall(ops, time.Time{})
		if err != nil {
			return err
		}
		call[1] = s.take
		calls[i] = call
	}
	args := calls[0]
	if mode == "merged" {
		args = scripts.MergeTakes(calls)
		args[1] = s.takes
		if s.noDistinct && args[len(args)-1] == "d" {
			args = args[:len(args)-1]
		}
	}
	return s.rdb.Do(context.Background(), args...).Err()
}
