package rlqs

import "github.com/prometheus/client_golang/prometheus"

// collector exports Stats as ratelimitd_rlqs_*.
type collector struct {
	srv *Server
	d   map[string]*prometheus.Desc
}

// metricHelp names and explains every series; the label, when there is
// one, is the last element.
var metricHelp = []struct{ name, help, label string }{
	{"streams", "Open StreamRateLimitQuotas streams (one per Envoy and domain).", ""},
	{"buckets", "Buckets the open streams track (at most RLQS_MAX_BUCKETS).", ""},
	{"untracked_reports_total", "Reports of buckets past RLQS_MAX_BUCKETS: no assignment, their allowed requests recorded.", ""},
	{"reports_total", "Usage reports received and handled.", ""},
	{"rejected_reports_total", "Reports refused (INVALID_ARGUMENT: malformed, oversized, a missing or changed domain); each ends its stream.", ""},
	{"responses_total", "Responses sent, each with the actions of one report, timer or reload.", ""},
	{"assignments_total", "Assignments sent, by kind: token_bucket (a grant charged in the counters), allow_all, deny_all, abandon.", "kind"},
	{"granted_hits_total", "Hits charged in the store for grants, before Envoy could use them.", ""},
	{"reported_hits_total", "Requests Envoys reported, by result (allowed, denied).", "result"},
	{"recorded_hits_total", "Reported allowed requests no grant was charged for (admitted under Envoy's no-assignment or expired-assignment behavior, or a shadow rule), recorded in the counters after the fact.", ""},
	{"returned_hits_total", "Hits given back: a rule of several limits that not all had room for.", ""},
	{"lapsed_hits_total", "Hits charged that no grant could carry: too close to their window's end, or a failed return.", ""},
	{"outstanding_hits", "Hits charged in the current windows not yet reported used: at most what the Envoys of this replica can still admit, and what its crash leaves charged.", ""},
	{"store_calls_total", "Store calls made for RLQS (each one round trip per Cluster slot group): one per report, timer or reload that needs the store (per 1,024 ops), and near the limit a second (fewer hits asked again, or hits given back).", ""},
	{"store_errors_total", "Store calls that failed; buckets needing their first grant then get their rules' on_store_error.", ""},
}

// RegisterMetrics adds the ratelimitd_rlqs_* metrics to reg.
func (s *Server) RegisterMetrics(reg prometheus.Registerer) error {
	c := &collector{srv: s, d: map[string]*prometheus.Desc{}}
	for _, m := range metricHelp {
		var labels []string
		if m.label != "" {
			labels = []string{m.label}
		}
		c.d[m.name] = prometheus.NewDesc("ratelimitd_rlqs_"+m.name, m.help, labels, nil)
	}
	return reg.Register(c)
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.Stats()
	gauge := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.GaugeValue, v)
	}
	count := func(name string, v float64, label ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.CounterValue, v, label...)
	}
	gauge("streams", float64(st.Streams))
	gauge("buckets", float64(st.Buckets))
	count("untracked_reports_total", float64(st.Untracked))
	gauge("outstanding_hits", float64(max(st.Outstanding, 0)))
	count("reports_total", float64(st.Reports))
	count("rejected_reports_total", float64(st.Rejected))
	count("responses_total", float64(st.Responses))
	count("assignments_total", float64(st.TokenBuckets), "token_bucket")
	count("assignments_total", float64(st.AllowAll), "allow_all")
	count("assignments_total", float64(st.DenyAll), "deny_all")
	count("assignments_total", float64(st.Abandoned), "abandon")
	count("granted_hits_total", float64(st.Granted))
	count("reported_hits_total", float64(st.Allowed), "allowed")
	count("reported_hits_total", float64(st.Denied), "denied")
	count("recorded_hits_total", float64(st.Recorded))
	count("returned_hits_total", float64(st.Returned))
	count("lapsed_hits_total", float64(st.Lapsed))
	count("store_calls_total", float64(st.StoreCalls))
	count("store_errors_total", float64(st.StoreErrors))
}
