package importrules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds the lines between a hand-written function's braces:
// a function that outgrows it does more than a reader can hold at once,
// and splits into steps named for what they do. A closure is checked on
// its own and counts toward its enclosing function too. Generated code
// (the `// Code generated … DO NOT EDIT.` header) is exempt.
const maxFuncLines = 80

// root is the module's directory, from this package's.
const root = "../../.."

// TestFunctionLength checks every hand-written non-test .go file of the
// module.
func TestFunctionLength(t *testing.T) {
	checkFunctionLength(t, func(name string) bool { return !strings.HasSuffix(name, "_test.go") })
}

// TestTestFunctionLength checks the _test.go files by the same bound: a
// scenario reads as a list of named steps, and a table of cases is a
// variable beside the test that runs it.
func TestTestFunctionLength(t *testing.T) {
	checkFunctionLength(t, func(name string) bool { return strings.HasSuffix(name, "_test.go") })
}

func checkFunctionLength(t *testing.T, inScope func(name string) bool) {
	files, err := moduleGoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	var over []string
	for _, file := range files {
		if !inScope(file) {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if ast.IsGenerated(f) {
			continue
		}
		checked++
		rel, _ := filepath.Rel(root, file)
		for _, l := range longFunctions(fset, f) {
			over = append(over, fmt.Sprintf("%s:%d %s %d lines", filepath.ToSlash(rel), l.line, l.name, l.length))
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d files; the module was not found", checked)
	}
	for _, o := range over {
		t.Errorf("%s, over %d: split it into steps named for what they do", o, maxFuncLines)
	}
}

// moduleGoFiles lists the module's .go files as the go command sees the
// tree: no testdata, no directories starting with . or _, and neither
// vendored third-party code nor the JavaScript tools' node_modules.
func moduleGoFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				rel == "third_party" || rel == "tools/node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

type longFunction struct {
	line, length int
	name         string
}

// longFunctions lists the functions and closures of f whose bodies run
// over maxFuncLines lines between their braces.
func longFunctions(fset *token.FileSet, f *ast.File) []longFunction {
	var long []longFunction
	check := func(name string, body *ast.BlockStmt) {
		if body == nil {
			return
		}
		open, end := fset.Position(body.Lbrace), fset.Position(body.Rbrace)
		if n := end.Line - open.Line - 1; n > maxFuncLines {
			long = append(long, longFunction{line: open.Line, length: n, name: name})
		}
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		name := "(package level)"
		if ok {
			name = fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				name = receiverName(fd.Recv.List[0].Type) + "." + name
			}
			check(name, fd.Body)
		}
		ast.Inspect(d, func(n ast.Node) bool {
			if lit, ok := n.(*ast.FuncLit); ok {
				check(name+" (closure)", lit.Body)
			}
			return true
		})
	}
	return long
}
