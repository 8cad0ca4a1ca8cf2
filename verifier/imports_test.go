package verifier_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// libraries are the module's packages the verifier may import: leaves that
// know nothing of proofs and import only the standard library, so that they
// lead to no code of what the verifier audits.
var libraries = []string{"github.com/pierhq/pier/internal/lib/jsonscan"}

// TestVerifierImportsNothingItAudits keeps the verifier independent: it may
// not reach the server, the minting code or the holder, or it would share a
// code path with what it audits.
func TestVerifierImportsNothingItAudits(t *testing.T) {
	for _, path := range moduleImports(t, ".") {
		if !slices.Contains(libraries, path) {
			t.Errorf("the verifier imports %s; the verifier must stand alone", path)
		}
	}
	for _, lib := range libraries {
		dir := filepath.Join("..", strings.TrimPrefix(lib, "github.com/pierhq/pier/"))
		for _, path := range imports(t, dir) {
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s, which the verifier imports, imports %s; it may import only the standard library", lib, path)
			}
		}
	}
}

// moduleImports lists the module's packages that dir's non-test files import.
func moduleImports(t *testing.T, dir string) []string {
	var mod []string
	for _, path := range imports(t, dir) {
		if strings.HasPrefix(path, "github.com/pierhq/pier/") {
			mod = append(mod, path)
		}
	}
	return mod
}

// imports lists what dir's non-test Go files import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	var paths []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			paths = append(paths, path)
		}
	}
	return paths
}
