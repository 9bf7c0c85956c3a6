package daemon

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// readmeSection returns the lines of README.md's "## <title>" section.
func readmeSection(t *testing.T, title string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## "+title
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("README.md has no %q section", title)
	}
	return out
}

// envName is a backquoted environment variable name, e.g. `REDIS_URL`.
var envName = regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")

// readmeSettings returns the variables README's Settings table documents:
// every backquoted name in the first column of its rows (a row may name
// several, e.g. `HOST` / `PORT`), and the text around the table.
func readmeSettings(t *testing.T) (table map[string]bool, prose string) {
	t.Helper()
	table = map[string]bool{}
	var rest []string
	for _, line := range readmeSection(t, "Settings") {
		if !strings.HasPrefix(line, "| `") {
			rest = append(rest, line)
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), " | ")
		for _, m := range envName.FindAllStringSubmatch(first, -1) {
			table[m[1]] = true
		}
	}
	if len(table) < 50 {
		t.Fatalf("README's Settings table names only %d variables; is it still a table?", len(table))
	}
	return table, strings.Join(rest, "\n")
}

// readSettings returns every variable the binary looks up: parseSettings,
// with each switch that guards further settings turned on in turn (the
// xDS source, Prometheus, tracing), plus `ratelimitd check` and tuneGC.
func readSettings(t *testing.T) map[string]bool {
	t.Helper()
	read := map[string]bool{}
	record := func(env map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			read[name] = true
			v, ok := env[name]
			return v, ok
		}
	}
	for _, env := range []map[string]string{
		{},
		{"CONFIG_TYPE": "GRPC_XDS_SOTW"},
		{"USE_PROMETHEUS": "true"},
		{"TRACING_ENABLED": "true"},
	} {
		// Errors do not matter here (the dirs do not exist): every
		// variable is looked up before they are reported.
		_, _ = parseSettings(nil, record(env))
	}
	_ = runCheck([]string{"--config", t.TempDir()}, record(nil), &strings.Builder{})
	tuneGC(settings{}, record(nil))
	return read
}

// ignoredButWarned are envoyproxy settings the binary reads only to warn
// that they have no effect here. They are not in the Settings table but in
// the list after it ("Not honoured, though a gateway may set them"), and
// docs/platforms.md's table says what each does instead.
var ignoredButWarned = []string{
	"GRPC_SERVER_TLS_CA_CERT",                       // Envoy Gateway's; client certificates are not required
	"REDIS_PERSECOND",                               // one Redis for all units
	"GRPC_UDS",                                      // no unix-socket gRPC listener
	"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",          // no effect
	"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", // XDS_CLIENT_BACKOFF_* instead
}

// TestReadmeSettingsTableMatchesBinary holds README's Settings table to the
// environment variables the binary reads: every variable read is in the
// table (or in the documented list of envoyproxy settings only warned
// about), and every variable in the table is read. The OTEL_EXPORTER_OTLP_*
// names of the table are read by the OpenTelemetry exporter itself, not
// through the binary's lookup, so they are not expected to be read.
func TestReadmeSettingsTableMatchesBinary(t *testing.T) {
	table, prose := readmeSettings(t)
	read := readSettings(t)

	var undocumented, unread []string
	for name := range read {
		switch {
		case slices.Contains(ignoredButWarned, name):
			if !strings.Contains(prose, "`"+name) {
				t.Errorf("%s is read to warn about it, but README's list of settings not honoured does not name it", name)
			}
			if table[name] {
				t.Errorf("%s has no effect, yet README's Settings table documents it", name)
			}
		case !table[name]:
			undocumented = append(undocumented, name)
		}
	}
	for name := range table {
		if !read[name] && !strings.HasPrefix(name, "OTEL_EXPORTER_OTLP_") {
			unread = append(unread, name)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unread)
	if len(undocumented) > 0 {
		t.Errorf("the binary reads variables README's Settings table does not document: %v", undocumented)
	}
	if len(unread) > 0 {
		t.Errorf("README's Settings table documents variables the binary never reads: %v", unread)
	}

	// Every flag is named in the section too.
	section := strings.Join(readmeSection(t, "Settings"), "\n")
	for _, f := range serveFlags() {
		if !strings.Contains(section, "`--"+f.name) {
			t.Errorf("README's Settings section does not name the flag --%s", f.name)
		}
	}
}
