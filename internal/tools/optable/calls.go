package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

const mod = "github.com/pierhq/pier"

// graph is the typed call graph of the packages the table reads: each
// function's declaration, and for each interface method the concrete
// methods that implement it, so that a call through an interface (the
// workflow door) is followed like any other.
type graph struct {
	fset  *token.FileSet
	decls map[*types.Func]*ast.FuncDecl
	infos map[*types.Func]*types.Info
	named []*types.Named
}

func load(root string, patterns ...string) (*graph, []*packages.Package, error) {
	cfg := &packages.Config{Fset: token.NewFileSet(), Dir: root, Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, nil, err
	}
	g := &graph{fset: cfg.Fset, decls: map[*types.Func]*ast.FuncDecl{}, infos: map[*types.Func]*types.Info{}}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, nil, fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		g.add(p)
	}
	return g, pkgs, nil
}

func (g *graph) add(p *packages.Package) {
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fn, ok := p.TypesInfo.Defs[fd.Name].(*types.Func); ok {
				g.decls[fn] = fd
				g.infos[fn] = p.TypesInfo
			}
		}
	}
	scope := p.Types.Scope()
	for _, name := range scope.Names() {
		if tn, ok := scope.Lookup(name).(*types.TypeName); ok {
			if n, ok := tn.Type().(*types.Named); ok && !types.IsInterface(n) {
				g.named = append(g.named, n)
			}
		}
	}
}

// callees lists, in order and once each, the functions fn calls: a call
// through an interface stands for every loaded method implementing it,
// and a method value passed to a call (a handler handing
// o.svc.Tasks.List to a generic list reader) counts as called there.
func (g *graph) callees(fn *types.Func) []*types.Func {
	fd, info := g.decls[fn], g.infos[fn]
	if fd == nil || fd.Body == nil {
		return nil
	}
	var out []*types.Func
	add := func(fs []*types.Func) {
		for _, f := range fs {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		for _, a := range c.Args {
			if sel, ok := ast.Unparen(a).(*ast.SelectorExpr); ok && isMethod(info, sel.Sel) {
				add(g.resolve(info, sel))
			}
		}
		add(g.resolve(info, c.Fun))
		return true
	})
	return out
}

// isMethod reports whether id names a method (a method value when it is
// not called).
func isMethod(info *types.Info, id *ast.Ident) bool {
	fn, ok := info.Uses[id].(*types.Func)
	return ok && fn.Signature().Recv() != nil
}

func (g *graph) resolve(info *types.Info, e ast.Expr) []*types.Func {
	var id *ast.Ident
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		id = e
	case *ast.SelectorExpr:
		id = e.Sel
	case *ast.IndexExpr:
		return g.resolve(info, e.X)
	default:
		return nil
	}
	fn, ok := info.Uses[id].(*types.Func)
	if !ok {
		return nil
	}
	fn = fn.Origin()
	recv := fn.Signature().Recv()
	if recv == nil || !types.IsInterface(recv.Type()) {
		return []*types.Func{fn}
	}
	return g.implementations(recv.Type().Underlying().(*types.Interface), fn.Name())
}

// implementations are the loaded concrete methods named name on types that
// implement iface.
func (g *graph) implementations(iface *types.Interface, name string) []*types.Func {
	var out []*types.Func
	for _, n := range g.named {
		if !types.Implements(n, iface) && !types.Implements(types.NewPointer(n), iface) {
			continue
		}
		obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(n), true, n.Obj().Pkg(), name)
		if m, ok := obj.(*types.Func); ok && g.decls[m] != nil {
			out = append(out, m)
		}
	}
	return out
}

// reach walks from fn through calls, depth first up to depth, and returns
// what want picks out on the way; follow says which callees to enter.
func (g *graph) reach(fn *types.Func, depth int, follow, want func(*types.Func) bool) []*types.Func {
	var out []*types.Func
	seen := map[*types.Func]bool{fn: true}
	var walk func(f *types.Func, d int)
	walk = func(f *types.Func, d int) {
		for _, c := range g.callees(f) {
			if want(c) && !slices.Contains(out, c) {
				out = append(out, c)
			}
			if d > 0 && !seen[c] && follow(c) {
				seen[c] = true
				walk(c, d-1)
			}
		}
	}
	walk(fn, depth)
	return out
}

// pkgOf is fn's package path, "" for builtins.
func pkgOf(fn *types.Func) string {
	if fn.Pkg() == nil {
		return ""
	}
	return fn.Pkg().Path()
}

// recvName is the name of fn's receiver type, "" for a function.
func recvName(fn *types.Func) string {
	recv := fn.Signature().Recv()
	if recv == nil {
		return ""
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return ""
}

// short names fn as pkg.Recv.Method (or pkg.Func) without the module path.
func short(fn *types.Func) string {
	p := pkgOf(fn)
	p = p[strings.LastIndex(p, "/")+1:]
	if r := recvName(fn); r != "" {
		return p + "." + r + "." + fn.Name()
	}
	return p + "." + fn.Name()
}
