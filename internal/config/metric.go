package config

import "strings"

// MetricKey is the stats key of one request matched to r, as envoyproxy
// builds it. It is StatKey unless the rule has detailed_metric or a node on
// its path has value_to_metric; then the request's values go into the key
// (one metric per value: mind the cardinality).
func (r *Rule) MetricKey(entries []Entry) string {
	if r.DetailedMetric {
		return r.detailedKey(entries)
	}
	valueInKey := false
	for _, l := range r.path {
		valueInKey = valueInKey || l.valueToMetric
	}
	if !valueInKey || len(entries) != len(r.path) {
		return r.StatKey
	}
	var sb strings.Builder
	sb.WriteString(r.Domain)
	for i, e := range entries {
		l := r.path[i]
		sb.WriteByte('.')
		sb.WriteString(e.Key)
		switch {
		case (l.kind == byWildcard || l.kind == byRegex) && (l.shared || !l.valueToMetric):
			sb.WriteString(l.separator())
			sb.WriteString(l.value)
		case l.kind == byValue || l.valueToMetric:
			if e.Value != "" {
				sb.WriteByte('_')
				sb.WriteString(e.Value)
			}
		}
	}
	return sb.String()
}

// detailedKey puts every request value into the key, except that values
// sharing a wildcard's counter (share_threshold) appear as the pattern.
// Without shared levels envoyproxy writes key_value even for an empty value;
// with them it omits the underscore there. Both quirks are kept so that
// dashboards carry over.
func (r *Rule) detailedKey(entries []Entry) string {
	shared := false
	for _, l := range r.path {
		shared = shared || l.shared
	}
	var sb strings.Builder
	sb.WriteString(r.Domain)
	for i, e := range entries {
		sb.WriteByte('.')
		sb.WriteString(e.Key)
		switch {
		case shared && i < len(r.path) && r.path[i].shared:
			sb.WriteString(r.path[i].separator())
			sb.WriteString(r.path[i].value)
		case !shared || e.Value != "":
			sb.WriteByte('_')
			sb.WriteString(e.Value)
		}
	}
	return sb.String()
}

// separator joins a level's key and its pattern in stats keys: a
// value_regex node's segment is key=~pattern (see builder.place).
func (l level) separator() string {
	if l.kind == byRegex {
		return "=~"
	}
	return "_"
}
