package envoystats

import (
	"runtime/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// gcCPUFraction is go_memstats_gc_cpu_fraction, the share of the process's
// CPU time spent in the garbage collector since it started. Envoy Gateway's
// global rate limit dashboard charts it; client_golang's Go collector no
// longer exports it, so it is computed here from runtime/metrics (without
// ReadMemStats' stop-the-world).
func gcCPUFraction() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "go_memstats_gc_cpu_fraction",
		Help: "The fraction of this program's available CPU time used by the GC since the program started.",
	}, func() float64 {
		s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindFloat64 || s[1].Value.Float64() == 0 {
			return 0
		}
		return s[0].Value.Float64() / s[1].Value.Float64()
	})
}
