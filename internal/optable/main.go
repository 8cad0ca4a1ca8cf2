// Command optable writes the operation table, from the contract to the
// store, into README.md and docs/architecture.md. It reads the code, so the
// table cannot drift from it: make generate runs it and CI fails on a diff.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/sdk"
)

const (
	begin = "<!-- BEGIN operation table: written by internal/optable (make generate) -->"
	end   = "<!-- END operation table -->"
)

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "optable:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	table, err := build(root)
	if err != nil {
		return err
	}
	for _, doc := range []string{"README.md", "docs/architecture.md"} {
		if err := splice(filepath.Join(root, doc), table); err != nil {
			return err
		}
	}
	return nil
}

// splice replaces what lies between the markers.
func splice(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s: markers %q and %q not found", path, begin, end)
	}
	out := slices.Concat(b[:i+len(begin)], []byte("\n"+table), b[j:])
	if bytes.Equal(out, b) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// funcs are a package's methods by receiver type and name, with their files.
type funcs map[string]map[string]*method

type method struct {
	file string
	decl *ast.FuncDecl
}

func parseDir(dir string) (funcs, error) {
	fset := token.NewFileSet()
	out := funcs{}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			recv := fd.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			id, ok := recv.(*ast.Ident)
			if !ok {
				continue
			}
			if out[id.Name] == nil {
				out[id.Name] = map[string]*method{}
			}
			out[id.Name][fd.Name.Name] = &method{file: filepath.Base(p), decl: fd}
		}
	}
	return out, nil
}

// find returns the method name on any receiver whose name passes keep.
func (fs funcs) find(name string, keep func(recv string) bool) (string, *method) {
	recvs := make([]string, 0, len(fs))
	for r := range fs {
		recvs = append(recvs, r)
	}
	slices.Sort(recvs)
	for _, r := range recvs {
		if m, ok := fs[r][name]; ok && keep(r) {
			return r, m
		}
	}
	return "", nil
}

// chain spells a selector chain such as o.svc.Quotes.Create.
func chain(e ast.Expr) []string {
	switch e := e.(type) {
	case *ast.Ident:
		return []string{e.Name}
	case *ast.SelectorExpr:
		return append(chain(e.X), e.Sel.Name)
	case *ast.CallExpr:
		c := chain(e.Fun)
		if len(c) > 0 {
			c[len(c)-1] += "()"
		}
		return c
	}
	return nil
}

// calls lists the selector chains a function calls, in order.
func calls(fd *ast.FuncDecl) [][]string {
	var out [][]string
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if ch := chain(c.Fun); len(ch) > 1 {
				out = append(out, ch)
			}
		}
		return true
	})
	return out
}

var storeNouns = []string{"Accounts()", "Bundles()", "Domains()", "Gates()", "Idempotency()", "Keys()", "Ledger()", "OAuth()",
	"Onboarding()", "Projects()", "Quotes()", "Sandbox()", "SandboxReleases()", "Services()", "ServiceVersions()", "ServiceRuns()", "ServiceLogs()", "Tasks()", "Workflows()", "Mail()"}

// storeCalls names the store methods a domain method reaches directly.
func storeCalls(fd *ast.FuncDecl) []string {
	var out []string
	for _, ch := range calls(fd) {
		n := len(ch)
		var name string
		switch {
		case n >= 2 && slices.Contains(storeNouns, ch[n-2]):
			name = "`" + strings.TrimSuffix(ch[n-2], "()") + "." + ch[n-1] + "`"
		case n >= 2 && ch[n-1] == "InTx" && (ch[n-2] == "store" || ch[n-2] == "Store"):
			name = "`InTx`"
		default:
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) > 4 {
		out = append(out[:4], "…")
	}
	return out
}

func build(root string) (string, error) {
	handlers, err := parseDir(filepath.Join(root, "server/internal/httpapi"))
	if err != nil {
		return "", err
	}
	services, err := parseDir(filepath.Join(root, "server/internal/service"))
	if err != nil {
		return "", err
	}
	sandbox, err := parseDir(filepath.Join(root, "server/internal/sandbox"))
	if err != nil {
		return "", err
	}
	commands := map[string]string{}
	for _, c := range cli.Capabilities(cli.NewRootCmd(&cli.Factory{IO: &cli.IOStreams{}})) {
		commands[c.Operation] = c.Command
	}
	var b strings.Builder
	b.WriteString("\n| operation | contract path | handler | service | store | SDK | CLI | MCP tool |\n|---|---|---|---|---|---|---|---|\n")
	for _, op := range sdk.Operations {
		name := goName(op.ID)
		handler, service, stores := "—", "—", []string{"—"}
		recv, h := handlers.find(name, func(r string) bool { return strings.HasSuffix(r, "Routes") })
		switch {
		case op.ID == "mcp":
			handler, service = "`mcp.Handler` (server/internal/mcp)", "each tool's own operation, dispatched in-process to the REST handler"
		case h == nil:
			handler = "`httpapi.Unimplemented` (plan:not_implemented)"
		default:
			handler = fmt.Sprintf("`httpapi.%s.%s` (%s)", recv, name, h.file)
			service, stores = serviceOf(h.decl, recv, handlers, services, sandbox)
		}
		if len(stores) == 0 {
			stores = []string{"—"}
		}
		cmd, tool, sdkName := "—", "—", "—"
		if c := commands[op.ID]; c != "" {
			cmd = "`" + c + "`"
		}
		if op.MCPTool != "" {
			tool = "`" + op.MCPTool + "`"
		}
		if op.ID != "mcp" {
			sdkName = "`Client." + name + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s %s` | %s | %s | %s | %s | %s | %s |\n", op.ID, op.Method, op.Path, handler, service, strings.Join(stores, ", "), sdkName, cmd, tool)
	}
	return b.String(), nil
}

// serviceOf finds the domain method a handler calls, looking one level into
// the handler's own helpers, and the store methods that method reaches.
func serviceOf(fd *ast.FuncDecl, recv string, handlers, services, sandbox funcs) (string, []string) {
	for _, ch := range calls(fd) {
		switch {
		case len(ch) == 4 && ch[1] == "svc":
			if _, m := services.find(ch[3], func(r string) bool { return r == ch[2] }); m != nil {
				return fmt.Sprintf("`service.%s.%s`", ch[2], ch[3]), storeCalls(m.decl)
			}
		case len(ch) == 2 && ch[0] == "sb":
			if _, m := sandbox.find(ch[1], func(string) bool { return true }); m != nil {
				return "`sandbox." + ch[1] + "`", storeCalls(m.decl)
			}
		case len(ch) == 2 && ch[0] == "o":
			if m := handlers[recv][ch[1]]; m != nil && m.decl != fd && !ast.IsExported(ch[1]) {
				if s, st := serviceOf(m.decl, recv, handlers, services, sandbox); s != "—" {
					return s, st
				}
			}
		}
	}
	return "—", []string{"—"}
}

// goName is the Go name oapi-codegen and the SDK give an operation id.
func goName(id string) string {
	var b strings.Builder
	for _, w := range strings.Split(id, "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}
