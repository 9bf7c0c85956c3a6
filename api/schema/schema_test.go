// Package schema_test keeps api/config.schema.json honest: the examples
// validate against it, and on every case below the schema and the Go loader
// (internal/config) agree on whether a file is valid.
package schema_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	// config.schema.json refers to the generated algorithms.schema.json by
	// its $id, which the compiler would otherwise fetch.
	f, err := os.Open("../algorithms.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("https://github.com/ratelimitd/ratelimitd/api/algorithms.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("../config.schema.json")
	if err != nil {
		t.Fatalf("compile api/config.schema.json: %v", err)
	}
	return s
}

// validate converts YAML to the JSON value the schema describes, as an
// editor or CI tool converting YAML for a JSON Schema validator would.
func validate(t *testing.T, s *jsonschema.Schema, doc []byte) error {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return err
	}
	raw, err := json.Marshal(jsonable(v))
	if err != nil {
		t.Fatalf("yaml to json: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	return s.Validate(inst)
}

// jsonable makes a decoded YAML value encodable as JSON: mapping keys
// become text (JSON has no other keys) and so do the floats JSON lacks.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonable(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonable(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonable(e)
		}
		return out
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return fmt.Sprint(x)
		}
	}
	return v
}

func TestExamplesMatchTheSchema(t *testing.T) {
	s := compileSchema(t)
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	files = append(files, filepath.Join("..", "..", "bench", "config", "bench.yaml"))
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

// TestReadmeExamplesLoad: api/README.md's complete example files (yaml
// blocks that start with a domain and have no <placeholder>) load and match
// the schema.
func TestReadmeExamplesLoad(t *testing.T) {
	s := compileSchema(t)
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, block := range strings.Split(string(raw), "```yaml\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		if !strings.HasPrefix(body, "domain:") || strings.Contains(body, "<") {
			continue
		}
		n++
		if _, err := config.Parse([]config.File{{Name: fmt.Sprintf("block%d.yaml", i), Data: []byte(body)}}); err != nil {
			t.Errorf("yaml block %d does not load: %v\n%s", i, err, body)
		}
		if err := validate(t, s, []byte(body)); err != nil {
			t.Errorf("yaml block %d does not match the schema: %v", i, err)
		}
	}
	if n == 0 {
		t.Fatal("no complete yaml example in README.md")
	}
}

// The Kubernetes example ships rules too: they must load and match.
func TestDeployConfigMapLoads(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "k8s", "configmap.yaml"))
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
