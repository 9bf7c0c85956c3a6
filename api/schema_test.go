// Package api_test keeps api/config.schema.json honest: the examples
// validate against it, and on every case below the schema and the Go loader
// (pkg/config) agree on whether a file is valid.
package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/pkg/config"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	s, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatalf("compile api/config.schema.json: %v", err)
	}
	return s
}

// validate converts YAML to the JSON value the schema describes.
func validate(t *testing.T, s *jsonschema.Schema, doc []byte) error {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("yaml to json: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	return s.Validate(inst)
}

func TestExamplesMatchTheSchema(t *testing.T) {
	s := compileSchema(t)
	files, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	files = append(files, filepath.Join("..", "bench", "config", "bench.yaml"))
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(t, s, doc); err != nil {
			t.Errorf("%s does not match the schema: %v", f, err)
		}
	}
}

func TestSchemaAgreesWithLoader(t *testing.T) {
	s := compileSchema(t)
	tests := []struct {
		name  string
		doc   string
		valid bool
	}{
		{"minimal", "domain: d\n", true},
		{"nested with wildcard", "domain: d\ndescriptors:\n  - key: path\n    value: /api/*\n    descriptors:\n      - key: user\n        rate_limit: {unit: Minute, requests_per_unit: 10}\n", true},
		{"every extension", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20, unit_multiplier: 2, refill_interval: 100ms, max_debt: 5}\n", true},
		{"unlimited", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n", true},
		{"flags and metadata", "domain: d\ndescriptors:\n  - key: k\n    value: a*\n    shadow_mode: yes\n    share_threshold: true\n    detailed_metric: true\n    metadata: {x: 1}\n    rate_limit: {unit: hour, requests_per_unit: 1, name: r, replaces: [{name: other}]}\n", true},
		{"bare scalar value", "domain: d\ndescriptors:\n  - key: code\n    value: 500\n    rate_limit: {unit: day, requests_per_unit: 0}\n", true},
		{"missing domain", "descriptors: []\n", false},
		{"empty domain", "domain: \"\"\n", false},
		{"unknown top-level key", "domain: d\nextra: 1\n", false},
		{"unknown descriptor key", "domain: d\ndescriptors:\n  - key: k\n    valeu: x\n", false},
		{"unknown rate_limit key", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, per: 2}\n", false},
		{"missing key", "domain: d\ndescriptors:\n  - value: x\n", false},
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", false},
		{"missing unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n", false},
		{"unlimited with a unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", false},
		{"negative requests", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", false},
		{"requests over uint32", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n", false},
		{"unknown algorithm", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: magic}\n", false},
		{"burst on a window", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}\n", false},
		{"max_debt on gcra", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra, max_debt: 5}\n", false},
		{"zero multiplier", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 0}\n", false},
		{"bad refill interval", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, refill_interval: soon}\n", false},
		{"replaces without a name", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}\n", false},
		{"share_threshold without a wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: plain\n    share_threshold: true\n", false},
		{"metadata not a mapping", "domain: d\ndescriptors:\n  - key: k\n    metadata: [1, 2]\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schemaErr := validate(t, s, []byte(tt.doc))
			_, loadErr := config.Parse([]config.File{{Name: "case.yaml", Data: []byte(tt.doc)}})
			if (schemaErr == nil) != tt.valid {
				t.Errorf("schema: valid=%v, want %v (%v)", schemaErr == nil, tt.valid, schemaErr)
			}
			if (loadErr == nil) != tt.valid {
				t.Errorf("loader: valid=%v, want %v (%v)", loadErr == nil, tt.valid, loadErr)
			}
		})
	}
}

// The Kubernetes example ships rules too: they must load and match.
func TestDeployConfigMapLoads(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "k8s", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) == 0 {
		t.Fatal("the ConfigMap has no data")
	}
	s := compileSchema(t)
	for name, doc := range cm.Data {
		if _, err := config.Parse([]config.File{{Name: name, Data: []byte(doc)}}); err != nil {
			t.Errorf("deploy/k8s/configmap.yaml %s: %v", name, err)
		}
		if err := validate(t, s, []byte(doc)); err != nil {
			t.Errorf("deploy/k8s/configmap.yaml %s against the schema: %v", name, err)
		}
	}
}
