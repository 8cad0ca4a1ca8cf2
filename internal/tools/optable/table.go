package main

import (
	"fmt"
	"go/types"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server"
)

// row is one operation, from its contract path to its store calls and
// the clients that call it.
type row struct {
	op                            sdk.Operation
	handler, service, store, kept string
	sdkName, commands, tool       string
}

var (
	httpapiPkg = mod + "/server/internal/httpapi"
	storePkg   = mod + "/server/internal/store"
	// domainPkgs hold the methods a handler hands an operation to.
	domainPkgs = []string{mod + "/server/internal/service", mod + "/server/internal/sandbox", mod + "/server/internal/workflow"}
)

func build(root string) ([]row, error) {
	g, _, err := load(root, "./server/internal/httpapi", "./server/internal/service", "./server/internal/sandbox",
		"./server/internal/workflow", "./server/internal/store", "./sdk", "./cli/...")
	if err != nil {
		return nil, err
	}
	keeping, err := server.Keeping()
	if err != nil {
		return nil, err
	}
	cmds := commands(g)
	rows := make([]row, 0, len(sdk.Operations))
	for _, op := range sdk.Operations {
		r := row{op: op, handler: "—", service: "—", store: "—", sdkName: "—", tool: "—"}
		r.kept = keptCell(keeping(op.ID))
		g.trace(&r)
		if op.ID != "mcp" {
			r.sdkName = "`Client." + goName(op.ID) + "`"
		}
		if op.MCPTool != "" {
			r.tool = "`" + op.MCPTool + "`"
		}
		r.commands = cmds.cell(op.ID)
		if op.ID == "mcp" {
			r.commands = "none: MCP clients speak to it"
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func keptCell(kept, versioned, fast bool) string {
	switch {
	case !kept:
		return "no"
	case versioned && fast:
		return "kept while the store's version holds; fast path"
	case versioned:
		return "kept while the store's version holds"
	case fast:
		return "kept (pure); fast path"
	}
	return "kept (pure)"
}

// trace fills the handler, service and store cells from the call graph.
func (g *graph) trace(r *row) {
	if r.op.ID == "mcp" {
		r.handler = "`mcp.Handler` (server/internal/mcp)"
		r.service = "each tool's own operation, dispatched in-process to the REST handler"
		r.store, r.sdkName, r.tool = "each tool's own", "`sdk.MCPClient` (any MCP client)", "the endpoint itself"
		return
	}
	h := g.handler(goName(r.op.ID))
	if h == nil {
		r.handler = "`httpapi.Unimplemented` (plan:not_implemented)"
		return
	}
	r.handler = fmt.Sprintf("`%s` (%s)", short(h), g.fileOf(h))
	svc := g.reach(h, 3, inPkgs(httpapiPkg), inPkgs(domainPkgs...))
	// The domain method is an exported method: helpers such as
	// service.ParseCursor are not where an operation lives.
	svc = slices.DeleteFunc(svc, func(f *types.Func) bool { return !f.Exported() || recvName(f) == "" })
	if len(svc) == 0 {
		r.service, r.store = "none: the handler answers itself", "none"
		return
	}
	r.service = "`" + short(svc[0]) + "`"
	stores := g.reach(svc[0], 3, inPkgs(pkgOf(svc[0])), func(f *types.Func) bool {
		// Filter is the store's paging helper, not a noun.
		r := recvName(f)
		return pkgOf(f) == storePkg && f.Exported() && (r != "" && r != "nouns" && r != "Filter" || f.Name() == "InTx")
	})
	r.store = storeCell(stores)
}

func storeCell(fs []*types.Func) string {
	if len(fs) == 0 {
		return "none"
	}
	names := make([]string, 0, len(fs))
	for _, f := range fs {
		n := "`" + recvName(f) + "." + f.Name() + "`"
		if f.Name() == "InTx" {
			n = "`InTx`"
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) > 4 {
		names = append(names[:4], "…")
	}
	return strings.Join(names, ", ")
}

// handler is the REST handler method named name on an httpapi *Routes type.
func (g *graph) handler(name string) *types.Func {
	var found *types.Func
	for fn := range g.decls {
		if pkgOf(fn) == httpapiPkg && fn.Name() == name && strings.HasSuffix(recvName(fn), "Routes") {
			found = fn
		}
	}
	return found
}

func inPkgs(paths ...string) func(*types.Func) bool {
	return func(f *types.Func) bool { return slices.Contains(paths, pkgOf(f)) }
}

func (g *graph) fileOf(fn *types.Func) string {
	return filepath.Base(g.fset.Position(g.decls[fn].Pos()).Filename)
}

func render(rows []row) string {
	var b strings.Builder
	b.WriteString("\n| operation | contract path | handler | service | store | kept answer | SDK | CLI | MCP tool |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | `%s %s` | %s | %s | %s | %s | %s | %s | %s |\n", r.op.ID, r.op.Method, r.op.Path,
			r.handler, r.service, r.store, r.kept, r.sdkName, r.commands, r.tool)
	}
	return b.String()
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
