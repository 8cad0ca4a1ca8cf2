package service

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNounGraph holds the nouns to the graph docs/architecture.md draws:
// which noun holds which, read from the fields of their structs, and no
// cycle. A noun is a struct with a store field. It holds another when a
// field (or a field of a struct it holds, to any depth) is that noun, a
// pointer to it, or an interface whose methods that noun declares. A
// func-typed field is a subscription wired in New, not a holding; an
// interface that no noun declares must be a port or a view of the store.
func TestNounGraph(t *testing.T) {
	pkg := parseNouns(t)
	got := pkg.graph(t)
	want := drawnGraph(t)
	for _, n := range sortedKeys(got) {
		if _, ok := want[n]; !ok {
			t.Errorf("noun %s holds %v and is not drawn in docs/architecture.md", n, got[n])
		}
	}
	for _, n := range sortedKeys(want) {
		g, ok := got[n]
		switch {
		case !ok:
			t.Errorf("docs/architecture.md draws %s, which is not a noun (no struct with a store field)", n)
		case !slices.Equal(g, want[n]):
			t.Errorf("%s holds %v; docs/architecture.md draws %v", n, g, want[n])
		}
	}
	if c := findCycle(got); c != nil {
		t.Errorf("the nouns have a cycle: %s", strings.Join(c, " → "))
	}
	pkg.checkWiring(t, got)
}

type nounPkg struct {
	newBody *ast.BlockStmt                 // service.New's
	funcs   []*ast.FuncDecl                // the methods
	types   map[string]ast.Expr            // the package's named types
	methods map[string]map[string]string   // type → method → signature
	nouns   map[string]*ast.StructType     // structs with a store field
	ports   map[string]bool                // interfaces Config names
	edges   map[string]map[string]struct{} // being built
}

func parseNouns(t *testing.T) *nounPkg {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	p := &nounPkg{types: map[string]ast.Expr{}, methods: map[string]map[string]string{}, nouns: map[string]*ast.StructType{}, ports: map[string]bool{}}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.collect(f)
	}
	if cfg, ok := p.types["Config"].(*ast.StructType); ok {
		for _, fl := range cfg.Fields.List {
			if id, ok := fl.Type.(*ast.Ident); ok {
				p.ports[id.Name] = true
			}
		}
	}
	return p
}

func (p *nounPkg) collect(f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok {
					continue
				}
				p.types[ts.Name.Name] = ts.Type
				if st, ok := ts.Type.(*ast.StructType); ok && hasField(st, "store") {
					p.nouns[ts.Name.Name] = st
				}
			}
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "New" {
				p.newBody = d.Body
			}
			if d.Recv == nil || len(d.Recv.List) == 0 {
				continue
			}
			p.funcs = append(p.funcs, d)
			recv := d.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				if p.methods[id.Name] == nil {
					p.methods[id.Name] = map[string]string{}
				}
				p.methods[id.Name][d.Name.Name] = signature(d.Type)
			}
		}
	}
}

// checkWiring holds New to the graph: a noun built there is given, field
// by field, only nouns the graph says it holds. An interface a noun's
// method set satisfies only by promotion (a noun that embeds the one
// declaring it) would otherwise hide a holding.
func (p *nounPkg) checkWiring(t *testing.T, graph map[string][]string) {
	if p.newBody == nil {
		t.Fatal("no func New in the service package")
	}
	built := map[string]string{} // variable → the noun it holds
	ast.Inspect(p.newBody, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, rhs := range as.Rhs {
			noun, lit := p.nounLiteral(rhs)
			if lit == nil {
				continue
			}
			if id, ok := as.Lhs[i].(*ast.Ident); ok {
				built[id.Name] = noun
			}
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				v, ok := kv.Value.(*ast.Ident)
				if !ok {
					continue
				}
				if held, isNoun := built[v.Name]; isNoun && !slices.Contains(graph[noun], held) {
					t.Errorf("New gives %s.%s the %s %s, which the graph does not say %s holds", noun, kv.Key, held, v.Name, noun)
				}
			}
		}
		return true
	})
	if len(built) < len(p.nouns) {
		t.Errorf("New builds %d nouns as variables (%v); the package has %d", len(built), built, len(p.nouns))
	}
}

// nounLiteral is e as &Noun{…}, or nil.
func (p *nounPkg) nounLiteral(e ast.Expr) (string, *ast.CompositeLit) {
	u, ok := e.(*ast.UnaryExpr)
	if !ok || u.Op != token.AND {
		return "", nil
	}
	lit, ok := u.X.(*ast.CompositeLit)
	if !ok {
		return "", nil
	}
	id, ok := lit.Type.(*ast.Ident)
	if !ok || p.nouns[id.Name] == nil {
		return "", nil
	}
	return id.Name, lit
}

// TestNounsUseWhatTheyHold fails when a noun holds something none of its
// methods (or those of the types that wrap it, such as deletion) use: a
// named field never selected, or an embedded part none of whose fields
// and methods is.
func TestNounsUseWhatTheyHold(t *testing.T) {
	p := parseNouns(t)
	for _, n := range sortedKeys(p.nouns) {
		used := p.selected(n)
		for _, fl := range p.nouns[n].Fields.List {
			for _, name := range fl.Names {
				if !used[name.Name] {
					t.Errorf("%s holds %s and never uses it", n, name.Name)
				}
			}
			if len(fl.Names) > 0 {
				continue
			}
			part := strings.TrimPrefix(types.ExprString(fl.Type), "*")
			if !slices.ContainsFunc(p.members(part), func(m string) bool { return used[m] }) {
				t.Errorf("%s embeds %s and uses none of it", n, part)
			}
		}
	}
}

// selected is every name selected on the receiver of a method of noun n,
// or of a type holding n.
func (p *nounPkg) selected(n string) map[string]bool {
	used := map[string]bool{}
	for _, fd := range p.funcs {
		recv := strings.TrimPrefix(types.ExprString(fd.Recv.List[0].Type), "*")
		if len(fd.Recv.List[0].Names) == 0 || fd.Body == nil || recv != n && !p.wraps(recv, n) {
			continue
		}
		name := fd.Recv.List[0].Names[0].Name
		ast.Inspect(fd.Body, func(x ast.Node) bool {
			if se, ok := x.(*ast.SelectorExpr); ok && strings.HasPrefix(types.ExprString(se.X)+".", name+".") {
				used[se.Sel.Name] = true
			}
			return true
		})
	}
	return used
}

// wraps reports whether the struct w has a field that is noun n.
func (p *nounPkg) wraps(w, n string) bool {
	st, ok := p.types[w].(*ast.StructType)
	return ok && slices.ContainsFunc(st.Fields.List, func(f *ast.Field) bool {
		return strings.TrimPrefix(types.ExprString(f.Type), "*") == n
	})
}

// members are a named type's fields and declared methods.
func (p *nounPkg) members(name string) []string {
	var out []string
	if st, ok := p.types[name].(*ast.StructType); ok {
		for _, fl := range st.Fields.List {
			for _, n := range fl.Names {
				out = append(out, n.Name)
			}
		}
	}
	for m := range p.methods[name] {
		out = append(out, m)
	}
	return out
}

func hasField(st *ast.StructType, name string) bool {
	for _, fl := range st.Fields.List {
		for _, n := range fl.Names {
			if n.Name == name {
				return true
			}
		}
	}
	return false
}

// signature is a func type's parameter and result types, without names.
func signature(ft *ast.FuncType) string {
	list := func(fl *ast.FieldList) string {
		var out []string
		if fl == nil {
			return ""
		}
		for _, f := range fl.List {
			for range max(len(f.Names), 1) {
				out = append(out, types.ExprString(f.Type))
			}
		}
		return strings.Join(out, ", ")
	}
	return "(" + list(ft.Params) + ") (" + list(ft.Results) + ")"
}

func (p *nounPkg) graph(t *testing.T) map[string][]string {
	p.edges = map[string]map[string]struct{}{}
	for name, st := range p.nouns {
		p.edges[name] = map[string]struct{}{}
		for _, fl := range st.Fields.List {
			p.walk(t, name, fl.Type, map[string]bool{})
		}
	}
	out := map[string][]string{}
	for n, to := range p.edges {
		out[n] = sortedKeys(to)
	}
	return out
}

// walk adds the nouns a field of type e makes from hold.
func (p *nounPkg) walk(t *testing.T, from string, e ast.Expr, seen map[string]bool) {
	switch e := e.(type) {
	case *ast.StarExpr:
		p.walk(t, from, e.X, seen)
	case *ast.ArrayType:
		p.walk(t, from, e.Elt, seen)
	case *ast.MapType:
		p.walk(t, from, e.Key, seen)
		p.walk(t, from, e.Value, seen)
	case *ast.ChanType:
		p.walk(t, from, e.Value, seen)
	case *ast.StructType:
		for _, fl := range e.Fields.List {
			p.walk(t, from, fl.Type, seen)
		}
	case *ast.InterfaceType:
		p.implementers(t, from, "", e)
	case *ast.Ident:
		if _, ok := p.nouns[e.Name]; ok {
			p.edges[from][e.Name] = struct{}{}
			return
		}
		def, ok := p.types[e.Name]
		if !ok || seen[e.Name] {
			return // predeclared, or already walked
		}
		seen[e.Name] = true
		if it, ok := def.(*ast.InterfaceType); ok {
			p.implementers(t, from, e.Name, it)
			return
		}
		p.walk(t, from, def, seen)
	}
	// Func types are subscriptions; selectors are other packages' types.
}

// implementers adds the nouns that declare every method of it.
func (p *nounPkg) implementers(t *testing.T, from, name string, it *ast.InterfaceType) {
	want, storeView := p.methodSet(it)
	if len(want) == 0 {
		return
	}
	found := false
	for n := range p.nouns {
		if declaresAll(p.methods[n], want) {
			p.edges[from][n] = struct{}{}
			found = true
		}
	}
	if !found && !storeView && !p.ports[name] && !strings.HasSuffix(name, "Store") {
		t.Errorf("%s holds an interface %s no noun declares, and it is neither a port (Config) nor a view of the store: %v", from, name, want)
	}
}

// methodSet is an interface's methods, with those of the interfaces it
// embeds from this package; storeView reports that it embeds only views
// of the store.
func (p *nounPkg) methodSet(it *ast.InterfaceType) (map[string]string, bool) {
	out := map[string]string{}
	storeView := len(it.Methods.List) > 0
	for _, m := range it.Methods.List {
		if ft, ok := m.Type.(*ast.FuncType); ok {
			out[m.Names[0].Name] = signature(ft)
			storeView = false
			continue
		}
		id, ok := m.Type.(*ast.Ident)
		if !ok {
			continue
		}
		storeView = storeView && strings.HasSuffix(id.Name, "Store")
		if inner, ok := p.types[id.Name].(*ast.InterfaceType); ok {
			ms, _ := p.methodSet(inner)
			for k, v := range ms {
				out[k] = v
			}
		}
	}
	return out, storeView
}

func declaresAll(have, want map[string]string) bool {
	for m, sig := range want {
		if have[m] != sig {
			return false
		}
	}
	return true
}

// drawnGraph reads the table under "| noun | holds |" in
// docs/architecture.md: a noun a row, what it holds comma-separated, "—"
// for nothing.
func drawnGraph(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| noun | holds |")
	if !ok {
		t.Fatal(`docs/architecture.md has no "| noun | holds |" table`)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(table, "\n")[2:] {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 2 {
			t.Fatalf("docs/architecture.md: row %q has not two cells", line)
		}
		noun := strings.Trim(strings.TrimSpace(cells[0]), "`")
		holds := []string{}
		for _, h := range strings.Split(cells[1], ",") {
			if h = strings.Trim(strings.TrimSpace(h), "`"); h != "" && h != "—" {
				holds = append(holds, h)
			}
		}
		slices.Sort(holds)
		out[noun] = holds
	}
	return out
}

// findCycle is a cycle of g, or nil.
func findCycle(g map[string][]string) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = onPath
		path = append(path, n)
		for _, m := range g[n] {
			switch state[m] {
			case onPath:
				return append(slices.Clone(path[slices.Index(path, m):]), m)
			case unseen:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, n := range sortedKeys(g) {
		if state[n] == unseen {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestFindCycle(t *testing.T) {
	if c := findCycle(map[string][]string{"a": {"b"}, "b": {"c"}, "c": {}}); c != nil {
		t.Errorf("a DAG has the cycle %v", c)
	}
	c := findCycle(map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}})
	if !slices.Equal(c, []string{"a", "b", "c", "a"}) {
		t.Errorf("cycle %v, want a → b → c → a", c)
	}
}
