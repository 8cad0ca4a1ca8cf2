// Package importrules holds the architecture's import rules as a test: every
// server package is placed as domain, adapter or shared library, the
// domain is free of its adapters, the shared libraries of both, the client packages are free of the
// server, the CLI's packages import down (cli, then the command packages,
// then cmdutil), the server is free of the public SDK (it uses the models), no server
// file reads the environment but the command's configuration
// (server/config.go), and no hand-written type in the server has more than
// 25 methods, and no hand-written function runs over 80 lines (funclength_test.go).
// `make lint` runs it.
package importrules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

const mod = "github.com/pierhq/pier"

// The domain: business rules and their data, which adapters depend on
// through what they are handed at construction, never the other way.
var domain = []string{
	mod + "/server/internal/service",
	mod + "/server/internal/store",
	mod + "/server/internal/money",
	mod + "/server/internal/pricing",
	mod + "/server/internal/registrar",
	mod + "/server/internal/zone",
	mod + "/server/internal/site",
	mod + "/server/internal/actions",
	// The built-in payment provider, like the registrar's, is a real
	// provider for what cannot run here (a card network).
	mod + "/server/internal/payments",
}

// shared are the server's libraries that the domain and its adapters both
// use, importing neither: apierr, the typed error envelope, carries the
// status and headers an answer needs.
var shared = []string{
	mod + "/server/internal/apierr",
	mod + "/server/internal/auth",
	mod + "/server/internal/safetext",
	mod + "/server/internal/operation",
	mod + "/server/internal/cache",
	mod + "/server/internal/ratelimit",
	mod + "/server/internal/httpheader",
	mod + "/server/internal/nameindex",
	mod + "/server/internal/clientaddr",
	mod + "/server/internal/jsonappend",
}

// What the domain must not import: transports and the adapters built on
// them.
var adapters = []string{
	"net/http",
	"github.com/miekg/dns",
	mod + "/server/internal/edge",
	mod + "/server/internal/dnsserver",
	mod + "/server/internal/httpapi",
	mod + "/server/internal/mcp",
	mod + "/server/internal/web",
	mod + "/server/internal/oauth",
	mod + "/server/internal/acme",
	mod + "/server/internal/tlsca",
	mod + "/server/internal/runner",
	mod + "/server/internal/smtpd",
	mod + "/server/internal/pgaddon",
	mod + "/server/internal/objstore",
	mod + "/server/internal/tasks",
	mod + "/server/internal/workflow",
	mod + "/server/internal/sandbox",
}

// The top-level internal/ holds three kinds of package: libraries shared
// by the client and the server (lib), the tools make runs (tools), and
// the test harnesses (testkit).
var (
	libs    = mod + "/internal/lib"
	tools   = mod + "/internal/tools"
	testkit = mod + "/internal/testkit"
)

// TestInternalLayersPointDown fails when an arrow runs back up: a library
// importing anything of the module but another library, any code but a
// test or another harness (the CLI's, cli/internal/clitest) importing a
// harness, or anything importing a tool.
func TestInternalLayersPointDown(t *testing.T) {
	for _, p := range load(t) {
		for imp := range p.Imports {
			switch {
			case under(p.PkgPath, libs) && under(imp, mod) && !under(imp, libs):
				t.Errorf("%s (a library) imports %s; libraries import only the standard library, dependencies and other libraries", p.PkgPath, imp)
			case under(imp, testkit) && !under(p.PkgPath, testkit, cliTestkit):
				t.Errorf("%s imports %s (a test harness) outside its tests", p.PkgPath, imp)
			case under(imp, tools):
				t.Errorf("%s imports %s (a tool)", p.PkgPath, imp)
			}
		}
		if under(p.PkgPath, mod+"/internal") && !under(p.PkgPath, libs, tools, testkit) {
			t.Errorf("%s: a top-level internal package belongs under internal/lib, internal/tools or internal/testkit", p.PkgPath)
		}
	}
}

// The CLI is laid out as gh's: cli assembles the tree from the command
// packages under cli/cmd, one a noun, which share cli/cmdutil; the
// helpers the tests share are in cli/internal/clitest. cli/client
// assembles the client binary's part of the tree, which cli builds on.
var (
	cliRoot    = mod + "/cli"
	cliClient  = mod + "/cli/client"
	cliCmds    = mod + "/cli/cmd"
	cliUtil    = mod + "/cli/cmdutil"
	cliTestkit = mod + "/cli/internal/clitest"
)

// TestCLILayersPointDown fails when an arrow of the CLI runs up or
// sideways: cmdutil importing a command package or cli, a command package
// importing another one or cli, or code other than tests importing
// clitest.
func TestCLILayersPointDown(t *testing.T) {
	placed := 0
	for _, p := range load(t) {
		if under(p.PkgPath, cliRoot) {
			placed++
			if p.PkgPath != cliRoot && p.PkgPath != cliClient && !under(p.PkgPath, cliCmds, cliUtil, cliTestkit) {
				t.Errorf("%s: a CLI package belongs in cli, cli/client, under cli/cmd, in cli/cmdutil or in cli/internal/clitest", p.PkgPath)
			}
		}
		for imp := range p.Imports {
			switch {
			case under(imp, cliTestkit) && !under(p.PkgPath, cliTestkit):
				t.Errorf("%s imports %s (the CLI's test helpers) outside its tests", p.PkgPath, imp)
			case under(p.PkgPath, cliUtil) && under(imp, cliRoot):
				t.Errorf("%s (the commands' shared code) imports %s; command packages import cmdutil, never the reverse", p.PkgPath, imp)
			case p.PkgPath == cliClient && imp == cliRoot:
				t.Errorf("%s (the client's tree) imports %s (the full tree); cli builds on client, never the reverse", p.PkgPath, imp)
			case under(p.PkgPath, cliCmds) && under(imp, cliRoot) && !under(imp, cliUtil) && !samePackageTree(p.PkgPath, imp):
				t.Errorf("%s (a command package) imports %s; a command package imports cmdutil only, and cli assembles them", p.PkgPath, imp)
			}
		}
	}
	if placed < 5 {
		t.Fatalf("found %d CLI packages; the packages did not load", placed)
	}
}

// samePackageTree reports whether imp is below the command package p, as a
// verb's own package below its noun would be.
func samePackageTree(p, imp string) bool { return strings.HasPrefix(imp, p+"/") }

// TestEveryServerPackageIsPlaced fails when a package under server/internal
// is on none of the lists: a new adapter must be named as one before the
// domain could import it unnoticed.
func TestEveryServerPackageIsPlaced(t *testing.T) {
	for _, p := range load(t) {
		if !under(p.PkgPath, mod+"/server/internal") {
			continue
		}
		if !under(p.PkgPath, domain...) && !under(p.PkgPath, adapters...) && !under(p.PkgPath, shared...) {
			t.Errorf("%s is neither domain, adapter nor shared library: add it to one of the lists in this file", p.PkgPath)
		}
	}
}

// TestSharedLibrariesStayBelow fails when a shared library imports the
// domain or an adapter.
func TestSharedLibrariesStayBelow(t *testing.T) {
	for _, p := range load(t) {
		if !under(p.PkgPath, shared...) {
			continue
		}
		for imp := range p.Imports {
			if under(imp, domain...) || under(imp, adapters...) && imp != "net/http" {
				t.Errorf("%s (a shared library) imports %s", p.PkgPath, imp)
			}
		}
	}
}

func load(t *testing.T) []*packages.Package {
	t.Helper()
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedImports | packages.NeedFiles, Dir: "../../.."}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("loaded %d packages", len(pkgs))
	}
	return pkgs
}

func under(path string, roots ...string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	for _, p := range load(t) {
		for imp := range p.Imports {
			switch {
			case under(p.PkgPath, domain...) && under(imp, adapters...):
				t.Errorf("%s (the domain) imports %s (an adapter); hand it an interface at construction instead", p.PkgPath, imp)
			case under(p.PkgPath, mod+"/cli", mod+"/sdk", mod+"/holder", mod+"/verifier", mod+"/conformance", mod+"/ledger") && under(imp, mod+"/server"):
				t.Errorf("%s (a client package) imports %s (the server)", p.PkgPath, imp)
			case under(p.PkgPath, mod+"/server") && under(imp, mod+"/sdk"):
				t.Errorf("%s (the server) imports %s (the public SDK); use the contract's types from %s/models and the policy table from server/internal/operation", p.PkgPath, imp, mod)
			case under(p.PkgPath, mod+"/models") && !slices.Contains([]string{"encoding/json", "errors", "strings", "time", "fmt"}, imp) && !under(imp, "github.com/oapi-codegen/runtime"):
				t.Errorf("%s (the generated models) imports %s; models depend on nothing but the standard library and oapi-codegen's runtime", p.PkgPath, imp)
			}
		}
	}
}

// Only the server command's configuration (server/config.go) reads the
// environment, into Config and the commands' flag defaults; every other
// file of the command, and everything below it, is handed its settings.
func TestNoEnvironmentReadsBelowTheCommand(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, p := range load(t) {
		if p.PkgPath != mod+"/server" && !under(p.PkgPath, mod+"/server/internal") {
			continue
		}
		for _, file := range p.GoFiles {
			if strings.HasSuffix(file, "_test.go") || p.PkgPath == mod+"/server" && filepath.Base(file) == "config.go" {
				continue
			}
			checked++
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && slices.Contains([]string{"Getenv", "LookupEnv", "Environ"}, sel.Sel.Name) {
					t.Errorf("%s:%d reads the environment (os.%s); read it in the server command's configuration", filepath.Base(file), fset.Position(sel.Pos()).Line, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d files; the packages did not load", checked)
	}
}

// maxMethods bounds the methods a hand-written type of the server declares
// itself: a type that outgrows it holds more than one thing, and splits
// into small types by what they hold (embedded, as the store's nouns and
// the REST API's routes are, or owned). Generated code is exempt.
const maxMethods = 25

func TestNoTypeOverMaxMethods(t *testing.T) {
	fset := token.NewFileSet()
	counts := map[string]int{}
	for _, p := range load(t) {
		if p.PkgPath != mod+"/server" && !under(p.PkgPath, mod+"/server/internal") {
			continue
		}
		for _, file := range p.GoFiles {
			if strings.HasSuffix(file, "_test.go") || strings.HasSuffix(file, ".gen.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if ast.IsGenerated(f) {
				continue
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
					continue
				}
				counts[p.PkgPath+"."+receiverName(fd.Recv.List[0].Type)]++
			}
		}
	}
	if len(counts) < 100 {
		t.Fatalf("counted the methods of %d types; the packages did not load", len(counts))
	}
	var over []string
	for typ, n := range counts {
		if n > maxMethods {
			over = append(over, fmt.Sprintf("%s has %d methods", strings.TrimPrefix(typ, mod+"/"), n))
		}
	}
	sort.Strings(over)
	for _, o := range over {
		t.Errorf("%s, over %d: split it into small types by what they hold", o, maxMethods)
	}
}

// receiverName is the type a method's receiver names: T for T, *T, T[P]
// and *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}
