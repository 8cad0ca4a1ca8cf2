package service

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

// speaksWire lists the files of the service that still take or return
// the contract's generated models. The domain works in its own types
// (states.go, Task, …) and the doors map them; a file leaves this list
// once it no longer imports models, and none joins it.
var speaksWire = []string{}

func TestOnlyListedFilesImportModels(t *testing.T) {
	const models = "github.com/pierhq/pier/models"
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var importing []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == models {
				importing = append(importing, name)
			}
		}
	}
	for _, name := range importing {
		if !slices.Contains(speaksWire, name) {
			t.Errorf("%s imports %s: the service speaks its own types; map to the contract in httpapi", name, models)
		}
	}
	for _, name := range speaksWire {
		if !slices.Contains(importing, name) {
			t.Errorf("%s no longer imports %s: take it off speaksWire", name, models)
		}
	}
}
