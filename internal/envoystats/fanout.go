package envoystats

import gostats "github.com/lyft/gostats"

// Fanout sends every stat to each sink: envoyproxy allows one sink at a
// time, ratelimitd any combination (statsd and Prometheus together).
func Fanout(sinks ...gostats.Sink) gostats.Sink {
	if len(sinks) == 1 {
		return sinks[0]
	}
	return fanout(sinks)
}

type fanout []gostats.Sink

var _ gostats.FlushableSink = fanout(nil)

func (f fanout) FlushCounter(name string, v uint64) {
	for _, s := range f {
		s.FlushCounter(name, v)
	}
}

func (f fanout) FlushGauge(name string, v uint64) {
	for _, s := range f {
		s.FlushGauge(name, v)
	}
}

func (f fanout) FlushTimer(name string, v float64) {
	for _, s := range f {
		s.FlushTimer(name, v)
	}
}

func (f fanout) Flush() {
	for _, s := range f {
		if fs, ok := s.(gostats.FlushableSink); ok {
			fs.Flush()
		}
	}
}

func (f fanout) close() {
	for _, s := range f {
		if c, ok := s.(interface{ close() }); ok {
			c.close()
		}
	}
}
