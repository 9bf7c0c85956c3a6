package structure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/ratelimitd/ratelimitd"

// internalImports is every internal package a pkg/ package may import in
// its non-test files, and why it cannot do without: none of them may show
// in an exported identifier (TestPublicAPIStandsAlone).
var internalImports = map[string][]string{
	// The service is the public front of the daemon's own parts.
	"pkg/service": {"internal/config", "internal/metrics", "internal/ratelimit"},
	// The Lua scripts and the connection settings the daemon shares.
	"pkg/store/redisstore": {"pkg/redisconn", "internal/scripts"},
	// The 64-way lock striping, shared by the stores, and the one copy of
	// the saturating sums.
	"pkg/store/memstore": {"internal/shardlock"},
	"pkg/store/lease":    {"internal/shardlock", "internal/satmath"},
	"pkg/algorithms":     {"internal/satmath"},
	"pkg/store/fallback": {"internal/shardlock"},
	// The routes file's YAML positions, shared with internal/config.
	"pkg/middleware": {"internal/yamldoc"},
	// The conformance suites step one fake clock, as every test does.
	"pkg/store/storetest": {"pkg/fakeclock"},
	"pkg/queue/queuetest": {"pkg/fakeclock", "internal/testkit"},
}

// listed is one package as `go list -json` describes it.
type listed struct {
	ImportPath string
	Export     string
	Imports    []string
	Standard   bool
}

// publicPackages lists every package under pkg/ with the export data of
// it and of its dependencies (CGO_ENABLED=0, as go vet and the binary are
// built, so that the build cache has them already).
func publicPackages(t *testing.T) (pub []listed, exports map[string]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", "./pkg/...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	exports = map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if strings.HasPrefix(p.ImportPath, module+"/pkg/") {
			pub = append(pub, p)
		}
	}
	return pub, exports
}

// TestPublicInternalImports: a pkg/ package imports internal/ only where
// internalImports says it must.
func TestPublicInternalImports(t *testing.T) {
	pub, _ := publicPackages(t)
	for _, p := range pub {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		allowed := map[string]bool{}
		for _, a := range internalImports[rel] {
			allowed[a] = true
		}
		for _, imp := range p.Imports {
			in := strings.TrimPrefix(imp, module+"/")
			if strings.HasPrefix(in, "internal/") && !allowed[in] {
				t.Errorf("%s imports %s: a public package stands alone (or say why it cannot in internalImports)", rel, in)
			}
		}
	}
}

// TestPublicAPIStandsAlone: no exported identifier of a pkg/ package has a
// type from an internal/ package in what a program outside the module can
// see of it (a signature, an exported field, an interface's method, a
// type's exported methods), so such a program can implement and call all
// of it. A type whose representation is internal but hidden (unexported
// fields only) is opaque to that program, and allowed.
func TestPublicAPIStandsAlone(t *testing.T) {
	pub, exports := publicPackages(t)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	var found []string
	for _, p := range pub {
		pkg, err := imp.Import(p.ImportPath)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, internalInAPI(pkg)...)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
}

// internalInAPI lists where pkg's exported API shows an internal type.
func internalInAPI(pkg *types.Package) []string {
	var out []string
	rel := strings.TrimPrefix(pkg.Path(), module+"/")
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		w := &apiWalker{seen: map[types.Type]bool{}}
		if tn, ok := obj.(*types.TypeName); ok && !tn.IsAlias() {
			w.declared(tn.Type())
		} else {
			w.walk(obj.Type())
		}
		for _, in := range w.internal {
			out = append(out, fmt.Sprintf("%s.%s shows %s", rel, name, in))
		}
	}
	return out
}

// apiWalker collects the internal named types reachable from a type
// through what is visible outside its package.
type apiWalker struct {
	seen     map[types.Type]bool
	internal []string
}

// declared walks a type declared in the package being checked: its
// representation as far as it is exported, and its exported methods.
func (w *apiWalker) declared(t types.Type) {
	named, ok := t.(*types.Named)
	if !ok {
		w.walk(t)
		return
	}
	if tp := named.TypeParams(); tp != nil {
		for i := range tp.Len() {
			w.walk(tp.At(i).Constraint())
		}
	}
	w.structure(named.Underlying())
	for _, mset := range []*types.MethodSet{types.NewMethodSet(named), types.NewMethodSet(types.NewPointer(named))} {
		for i := range mset.Len() {
			if m := mset.At(i).Obj(); m.Exported() {
				w.walk(m.Type())
			}
		}
	}
}

// structure walks an underlying type: a struct's exported fields (and
// embedded ones, whose fields and methods are promoted), an interface's
// methods, the parts of anything else.
func (w *apiWalker) structure(t types.Type) {
	s, ok := t.(*types.Struct)
	if !ok {
		w.walk(t)
		return
	}
	for i := range s.NumFields() {
		if f := s.Field(i); f.Exported() || f.Embedded() {
			w.walk(f.Type())
		}
	}
}

func (w *apiWalker) walk(t types.Type) {
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if pkg := t.Obj().Pkg(); pkg != nil && strings.Contains(pkg.Path()+"/", "/internal/") {
			w.internal = append(w.internal, pkg.Path()+"."+t.Obj().Name())
			return
		}
		if args := t.TypeArgs(); args != nil {
			for i := range args.Len() {
				w.walk(args.At(i))
			}
		}
		// A type of another public package is checked as its own
		// package's; one of this package is checked where it is
		// declared, unless it is unexported and so only seen here.
		if !t.Obj().Exported() && t.Obj().Pkg() != nil && strings.HasPrefix(t.Obj().Pkg().Path(), module+"/pkg/") {
			w.declared(t)
		}
	case *types.Alias:
		w.walk(types.Unalias(t))
	case *types.Pointer:
		w.walk(t.Elem())
	case *types.Slice:
		w.walk(t.Elem())
	case *types.Array:
		w.walk(t.Elem())
	case *types.Map:
		w.walk(t.Key())
		w.walk(t.Elem())
	case *types.Chan:
		w.walk(t.Elem())
	case *types.Signature:
		w.walk(t.Params())
		w.walk(t.Results())
		if tp := t.TypeParams(); tp != nil {
			for i := range tp.Len() {
				w.walk(tp.At(i).Constraint())
			}
		}
	case *types.Tuple:
		for i := range t.Len() {
			w.walk(t.At(i).Type())
		}
	case *types.Struct:
		w.structure(t)
	case *types.Interface:
		for i := range t.NumMethods() {
			w.walk(t.Method(i).Type())
		}
		for i := range t.NumEmbeddeds() {
			w.walk(t.EmbeddedType(i))
		}
	case *types.TypeParam:
		w.walk(t.Constraint())
	case *types.Union:
		for i := range t.Len() {
			w.walk(t.Term(i).Type())
		}
	}
}
