package service

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pierhq/pier/server/internal/money"
)

// An agent cannot approve its own gate: deciding takes a Human, and the
// server makes a Human only from a signed-in session (SignIn, SessionFor,
// a signup's review). No code outside accounts.go builds one, so no agent
// key, grant or request body becomes a person.
func TestOnlySessionsMakeHumans(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			inService := filepath.Base(filepath.Dir(path)) == "service"
			bad := false
			switch tp := lit.Type.(type) {
			case *ast.Ident: // Human, within the service package
				bad = inService && tp.Name == "Human" && filepath.Base(path) != "accounts.go"
			case *ast.SelectorExpr: // service.Human, elsewhere
				x, ok := tp.X.(*ast.Ident)
				bad = ok && x.Name == "service" && tp.Sel.Name == "Human"
			}
			if bad {
				t.Errorf("%s builds a service.Human outside a session", fset.Position(lit.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A gate an agent opened is decided by a person of its organisation, and
// the decision records that person, never the key.
func TestGateDecidedByAPerson(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	v, err := h.svc.Approvals.RequestBudgetRaise(h.ctx, a.agent, a.project, money.FromUSD(3), "traffic")
	h.must(err)
	gates, _ := h.svc.Approvals.Pending(h.ctx, a.org)
	// The other organisation's person finds no such gate.
	wantCode(t, h.svc.Approvals.Decide(h.ctx, b.human, gates[0].ID, true), "not_found:resource")
	h.must(h.svc.Approvals.Decide(h.ctx, a.human, gates[0].ID, true))
	gv, _ := h.svc.Approvals.GateFor(h.ctx, a.human, gates[0].ID)
	if gv.DecidedBy != "human:"+a.human.UserID || gv.State != "approved" || gv.TaskState != "succeeded" {
		t.Fatalf("decided %+v", gv)
	}
	entries, _ := h.svc.Approvals.LedgerFor(h.ctx, a.human)
	last := entries[len(entries)-1]
	if last.Action != "decide_gate" || last.Actor != "human:"+a.human.UserID {
		t.Fatalf("ledger %+v", last)
	}
	if got := h.task(a.org, v.ID); got.Result["budgetLimitUsd"] != float64(13) {
		t.Fatalf("result %v", got.Result)
	}
}
