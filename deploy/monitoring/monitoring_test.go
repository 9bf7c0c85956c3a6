// Package monitoring checks the dashboards and alerts of deploy/monitoring
// and Envoy Gateway's queries against ratelimitd: every expression parses
// with Prometheus's own PromQL parser, and every metric one names is in a
// scrape of the binary after a traffic run. A module of its own keeps
// Prometheus out of ratelimitd's go.mod.
package monitoring

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// query is one PromQL expression and where it comes from.
type query struct{ from, expr string }

// grafanaVars are the interval variables Grafana replaces before sending a
// query; other variables only appear inside label values.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// dashboardQueries are a Grafana dashboard's panel expressions and its
// label_values() variables' selectors.
func dashboardQueries(t *testing.T, file string) []query {
	t.Helper()
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
			Panels  []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	readJSON(t, file, &dash)
	var out []query
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, query{file + ": " + p.Title, grafanaVars.Replace(tg.Expr)})
		}
		for _, inner := range p.Panels {
			for _, tg := range inner.Targets {
				out = append(out, query{file + ": " + inner.Title, grafanaVars.Replace(tg.Expr)})
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range dash.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			out = append(out, query{file + ": variable " + v.Name, m[1]})
		}
	}
	return out
}

// ruleQueries are a PrometheusRule's alert and record expressions.
func ruleQueries(t *testing.T, file string) []query {
	t.Helper()
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct{ Alert, Record, Expr string }
			}
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []query
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, query{file + ": " + r.Alert + r.Record, r.Expr})
		}
	}
	return out
}

// lineQueries are a file's lines but comments and blank ones.
func lineQueries(t *testing.T, file string) []query {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []query
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, query{file + ":" + strconv.Itoa(n), line})
		}
	}
	return out
}

// allQueries are every expression this directory holds.
func allQueries(t *testing.T) []query {
	t.Helper()
	qs := dashboardQueries(t, "ratelimitd-dashboard.json")
	qs = append(qs, ruleQueries(t, "prometheusrule.yaml")...)
	qs = append(qs, lineQueries(t, "testdata/envoy-gateway.promql")...)
	if len(qs) < 30 {
		t.Fatalf("only %d queries found; did a file's layout change?", len(qs))
	}
	return qs
}

// metricNames parses q and returns the metric names its selectors name.
func metricNames(q query) ([]string, error) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(q.expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name != "" {
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// TestQueriesParse: every expression is valid PromQL and names a metric.
func TestQueriesParse(t *testing.T) {
	for _, q := range allQueries(t) {
		names, err := metricNames(q)
		if err != nil {
			t.Errorf("%s: %q: %v", q.from, q.expr, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", q.from, q.expr)
		}
	}
}

// TestQueriesFindSeries: after a traffic run that makes every event happen
// once (denials, local-cache denials, usage past a limit, leases, a bad
// config, a request without a domain, Redis down, rules decided locally
// meanwhile), the binary's scrape
// holds every metric the queries name.
func TestQueriesFindSeries(t *testing.T) {
	names := map[string][]string{}
	for _, q := range allQueries(t) {
		ns, err := metricNames(q)
		if err != nil {
			t.Fatalf("%s: %v", q.from, err)
		}
		for _, n := range ns {
			names[n] = append(names[n], q.from)
		}
	}
	have := trafficRun(t)
	var missing []string
	for n, from := range names {
		if !have[n] {
			missing = append(missing, n+" (in "+strings.Join(from, "; ")+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("no series for %s", m)
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
