package daemon

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// markdownLines returns the lines of a Markdown file of the repository.
func markdownLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(raw), "\n")
}

// readmeSection returns the lines of README.md's "## <title>" section.
func readmeSection(t *testing.T, title string) []string {
	t.Helper()
	var out []string
	in := false
	for _, line := range markdownLines(t, "README.md") {
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

// settingsRow splits a table row into its setting and default columns.
func settingsRow(line string) (setting, def string, ok bool) {
	if !strings.HasPrefix(line, "| `") {
		return "", "", false
	}
	cols := strings.Split(strings.TrimPrefix(line, "|"), " | ")
	if len(cols) < 3 {
		return "", "", false
	}
	return strings.TrimSpace(cols[0]), strings.TrimSpace(cols[1]), true
}

// documentedSettings returns the variables docs/settings.md's table
// documents: every backquoted name in the first column of its rows (a row
// may name several, e.g. `HOST` / `PORT`), each row's default by its first
// column, and the text around the table.
func documentedSettings(t *testing.T) (table map[string]bool, defaults map[string]string, prose string) {
	t.Helper()
	table, defaults = map[string]bool{}, map[string]string{}
	var rest []string
	for _, line := range markdownLines(t, settingsDoc) {
		setting, def, ok := settingsRow(line)
		if !ok {
			rest = append(rest, line)
			continue
		}
		defaults[setting] = def
		for _, m := range envName.FindAllStringSubmatch(setting, -1) {
			table[m[1]] = true
		}
	}
	if len(table) < 50 {
		t.Fatalf("%s's table names only %d variables; is it still a table?", settingsDoc, len(table))
	}
	return table, defaults, strings.Join(rest, "\n")
}

const settingsDoc = "docs/settings.md"

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
// that they have no effect here. They are not in the settings table but in
// the list after it ("Not honoured"), and docs/platforms.md's table says
// what each does instead.
var ignoredButWarned = []string{
	"GRPC_SERVER_TLS_CA_CERT",                       // Envoy Gateway's; client certificates are not required
	"REDIS_PERSECOND",                               // one Redis for all units
	"GRPC_UDS",                                      // no unix-socket gRPC listener
	"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",          // no effect
	"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", // XDS_CLIENT_BACKOFF_* instead
}

// TestReadmeSettingsTableMatchesBinary holds docs/settings.md's table to
// the environment variables the binary reads: every variable read is in the
// table (or in the documented list of envoyproxy settings only warned
// about), and every variable in the table is read. The OTEL_EXPORTER_OTLP_*
// names of the table are read by the OpenTelemetry exporter itself, not
// through the binary's lookup, so they are not expected to be read.
func TestReadmeSettingsTableMatchesBinary(t *testing.T) {
	table, _, prose := documentedSettings(t)
	read := readSettings(t)

	var undocumented, unread []string
	for name := range read {
		switch {
		case slices.Contains(ignoredButWarned, name):
			if !strings.Contains(prose, "`"+name) {
				t.Errorf("%s is read to warn about it, but %s's list of settings not honoured does not name it", name, settingsDoc)
			}
			if table[name] {
				t.Errorf("%s has no effect, yet %s's table documents it", name, settingsDoc)
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
		t.Errorf("the binary reads variables %s's table does not document: %v", settingsDoc, undocumented)
	}
	if len(unread) > 0 {
		t.Errorf("%s's table documents variables the binary never reads: %v", settingsDoc, unread)
	}

	// Every flag is named in the page too.
	for _, f := range serveFlags() {
		if !strings.Contains(prose, "`--"+f.name) {
			t.Errorf("%s does not name the flag --%s", settingsDoc, f.name)
		}
	}
}

// TestReadmeSettingsRepeatTheFullTable: the README's short table of the
// settings most changed repeats docs/settings.md's rows (setting and
// default), so the two cannot drift apart.
func TestReadmeSettingsRepeatTheFullTable(t *testing.T) {
	_, defaults, _ := documentedSettings(t)
	rows := 0
	for _, line := range readmeSection(t, "Settings") {
		setting, def, ok := settingsRow(line)
		if !ok {
			continue
		}
		rows++
		full, found := defaults[setting]
		switch {
		case !found:
			t.Errorf("README's settings row %s is not a row of %s", setting, settingsDoc)
		case full != def:
			t.Errorf("README gives %s the default %s, %s gives %s", setting, def, settingsDoc, full)
		}
	}
	if rows < 5 {
		t.Errorf("README's Settings table has %d rows; is it still a table?", rows)
	}
}
