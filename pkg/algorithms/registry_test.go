package algorithms_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func TestRegistryParseRoundTrip(t *testing.T) {
	for _, a := range algorithms.All() {
		for _, name := range []string{a.String(), strings.ToUpper(a.String())} {
			got, err := algorithms.Parse(name)
			if err != nil || got != a {
				t.Errorf("Parse(%q) = %v, %v; want %v", name, got, err, a)
			}
		}
		if !a.Valid() || a.Family() == 0 {
			t.Errorf("%s: Valid %v, Family %d", a, a.Valid(), a.Family())
		}
	}
	for _, name := range []string{"", "fixed", "gcra ", "token-bucket"} {
		if a, err := algorithms.Parse(name); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", name, a)
		}
	}
}

// TestUnknownAlgorithmIsNeverDefaulted: a value outside the registry is
// invalid and denied, never run as some other algorithm.
func TestUnknownAlgorithmIsNeverDefaulted(t *testing.T) {
	for _, a := range []algorithms.Algorithm{0, algorithms.Algorithm(len(algorithms.All()) + 1), 255} {
		lim := algorithms.Limit{Algorithm: a, Requests: 10, Period: time.Second}
		if a.Valid() || lim.Validate() == nil || a.Family() != 0 || a.Bucket() {
			t.Errorf("%s: Valid %v, Validate %v, Family %d, Bucket %v", a, a.Valid(), lim.Validate(), a.Family(), a.Bucket())
		}
		d, _ := algorithms.Take(lim, algorithms.State{}, 1, time.UnixMicro(1e15))
		if d.Allowed || d.RetryAfter != algorithms.Never {
			t.Errorf("%s: Take = %+v, want denied forever", a, d)
		}
	}
}

var updateSchema = flag.Bool("update-schema", false, "rewrite api/algorithms.schema.json from the registry")

// schemaFile is the part of the config's JSON Schema that the registry
// decides; api/config.schema.json refers to its definitions.
const schemaFile = "../../api/algorithms.schema.json"

// algorithmsSchema is api/algorithms.schema.json as the registry makes it:
// the algorithm names (and a case-insensitive pattern, as the loader
// accepts any case), the buckets (burst applies) and the stepped ones
// (refill_interval and max_debt apply).
func algorithmsSchema() []byte {
	var bucket, stepped []string
	for _, a := range algorithms.All() {
		if a.Bucket() {
			bucket = append(bucket, a.String())
		}
		if a.Stepped() {
			stepped = append(stepped, a.String())
		}
	}
	names := algorithms.Names()
	doc := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         "https://github.com/ratelimitd/ratelimitd/api/algorithms.schema.json",
		"description": "ratelimitd's algorithms, generated from pkg/algorithms' registry by go generate ./pkg/algorithms: do not edit. api/config.schema.json refers to these definitions.",
		"$defs": map[string]any{
			"algorithm": map[string]any{
				"description": "ratelimitd: how the limit is enforced, case-insensitive; default fixed_window.",
				"anyOf": []any{
					map[string]any{"enum": names},
					map[string]any{"type": "string", "pattern": caseless(names)},
				},
			},
			"bucketAlgorithm":  map[string]any{"description": "The algorithms burst applies to.", "type": "string", "pattern": caseless(bucket)},
			"steppedAlgorithm": map[string]any{"description": "The algorithms refill_interval and max_debt apply to.", "type": "string", "pattern": caseless(stepped)},
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// caseless is a pattern matching exactly names, in any case.
func caseless(names []string) string {
	alts := make([]string, len(names))
	for i, n := range names {
		var b strings.Builder
		for _, r := range n {
			if lo, up := strings.ToLower(string(r)), strings.ToUpper(string(r)); lo != up {
				b.WriteString("[" + lo + up + "]")
			} else {
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		alts[i] = b.String()
	}
	return "^(" + strings.Join(alts, "|") + ")$"
}

// TestSchemaMatchesRegistry: api/algorithms.schema.json is what the
// registry makes (go generate ./pkg/algorithms rewrites it), and its
// patterns accept each name in any case and nothing else.
func TestSchemaMatchesRegistry(t *testing.T) {
	want := algorithmsSchema()
	if *updateSchema {
		if err := os.WriteFile(schemaFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what the registry makes: run go generate ./pkg/algorithms", schemaFile)
	}
	re := regexp.MustCompile(caseless(algorithms.Names()))
	for _, n := range algorithms.Names() {
		if !re.MatchString(strings.ToUpper(n)) || !re.MatchString(n) || re.MatchString(n+"x") {
			t.Errorf("pattern %s and %q disagree", re, n)
		}
	}
}

// TestDocsHaveASectionPerAlgorithm: docs/algorithms.md has one "## name"
// section per algorithm, in registry order.
func TestDocsHaveASectionPerAlgorithm(t *testing.T) {
	raw, err := os.ReadFile("../../docs/algorithms.md")
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, m := range regexp.MustCompile(`(?m)^## ([a-z_]+)$`).FindAllStringSubmatch(string(raw), -1) {
		if _, err := algorithms.Parse(m[1]); err == nil {
			sections = append(sections, m[1])
		}
	}
	if !slices.Equal(sections, algorithms.Names()) {
		t.Errorf("docs/algorithms.md sections %v, registry %v", sections, algorithms.Names())
	}
}
