package config

// MetricKey is the stats key of one request matched to r, as envoyproxy
// builds it. It is StatKey unless the rule has detailed_metric or a node on
// its path has value_to_metric; then the request's values go into the key
// (one metric per value: mind the cardinality).
func (r *Rule) MetricKey(entries []Entry) string {
	if !r.DetailedMetric && !r.valueInKey(entries) {
		return r.StatKey
	}
	return string(r.AppendMetricKey(nil, entries))
}

// AppendMetricKey appends MetricKey(entries) to dst, so that an observer can
// look a request's key up in a buffer of its own instead of allocating a
// string per request.
func (r *Rule) AppendMetricKey(dst []byte, entries []Entry) []byte {
	if r.DetailedMetric {
		return r.appendDetailedKey(dst, entries)
	}
	if !r.valueInKey(entries) {
		return append(dst, r.StatKey...)
	}
	dst = append(dst, r.Domain...)
	for i, e := range entries {
		l := r.path[i]
		dst = append(dst, '.')
		dst = append(dst, e.Key...)
		switch {
		case (l.kind == byWildcard || l.kind == byRegex) && (l.shared || !l.valueToMetric):
			dst = append(dst, l.separator()...)
			dst = append(dst, l.value...)
		case l.kind == byValue || l.valueToMetric:
			if e.Value != "" {
				dst = append(dst, '_')
				dst = append(dst, e.Value...)
			}
		}
	}
	return dst
}

// valueInKey reports whether a node on the path puts the request's value
// into the key (value_to_metric) for a request of the rule's depth.
func (r *Rule) valueInKey(entries []Entry) bool {
	if len(entries) != len(r.path) {
		return false
	}
	for _, l := range r.path {
		if l.valueToMetric {
			return true
		}
	}
	return false
}

// appendDetailedKey puts every request value into the key, except that
// values sharing a wildcard's counter (share_threshold) appear as the
// pattern. Without shared levels envoyproxy writes key_value even for an
// empty value; with them it omits the underscore there. Both quirks are kept
// so that dashboards carry over.
func (r *Rule) appendDetailedKey(dst []byte, entries []Entry) []byte {
	shared := false
	for _, l := range r.path {
		shared = shared || l.shared
	}
	dst = append(dst, r.Domain...)
	for i, e := range entries {
		dst = append(dst, '.')
		dst = append(dst, e.Key...)
		switch {
		case shared && i < len(r.path) && r.path[i].shared:
			dst = append(dst, r.path[i].separator()...)
			dst = append(dst, r.path[i].value...)
		case !shared || e.Value != "":
			dst = append(dst, '_')
			dst = append(dst, e.Value...)
		}
	}
	return dst
}

// separator joins a level's key and its pattern in stats keys: a
// value_regex node's segment is key=~pattern (see builder.place).
func (l level) separator() string {
	if l.kind == byRegex {
		return "=~"
	}
	return "_"
}
