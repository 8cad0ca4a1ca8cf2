package main

import (
	"strings"
	"testing"
)

// TestEveryCellIsFilled fails when the table cannot say, for some
// operation, where it lives: a handler the walk did not find, a call
// through an interface it did not follow, a command or tool missing.
func TestEveryCellIsFilled(t *testing.T) {
	rows, err := build("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no rows")
	}
	for _, r := range rows {
		cells := map[string]string{"handler": r.handler, "service": r.service, "store": r.store, "kept answer": r.kept,
			"SDK": r.sdkName, "CLI": r.commands, "MCP tool": r.tool}
		for name, c := range cells {
			if strings.TrimSpace(c) == "" || c == "—" {
				t.Errorf("%s: the %s cell is empty", r.op.ID, name)
			}
		}
		if strings.HasPrefix(r.handler, "`httpapi.Unimplemented`") {
			t.Errorf("%s: no handler implements it", r.op.ID)
		}
	}
}

// TestTheTableFollowsWhatItPromises pins the rows the table exists to
// show: a call through an interface, a kept answer on the fast path, and a
// hand-written command beside a generated one.
func TestTheTableFollowsWhatItPromises(t *testing.T) {
	rows, err := build("../../..")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]row{}
	for _, r := range rows {
		byID[r.op.ID] = r
	}
	checks := []struct{ op, cell, want string }{
		{"apply_workflow", byID["apply_workflow"].service, "`workflow.Engine.Apply`"},
		{"search_domains", byID["search_domains"].kept, "fast path"},
		{"create_quote", byID["create_quote"].commands, "`pier launch` (hand-written)"},
		{"create_quote", byID["create_quote"].store, "`Quotes."},
	}
	for _, c := range checks {
		if !strings.Contains(c.cell, c.want) {
			t.Errorf("%s: %q does not contain %q", c.op, c.cell, c.want)
		}
	}
}
