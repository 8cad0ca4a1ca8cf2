package actions

import "testing"

// Every required argument an action does not carry is named in
// missingArguments; those it carries are not.
func TestToolListsMissingArguments(t *testing.T) {
	a, err := Tool("create_quote", "agent", map[string]any{"projectId": "prj_1"}).AsToolAction()
	if err != nil {
		t.Fatal(err)
	}
	if a.MissingArguments == nil || len(*a.MissingArguments) != 1 || (*a.MissingArguments)[0] != "items" {
		t.Fatalf("missingArguments %v, want [items]", a.MissingArguments)
	}
	full, _ := Tool("get_task", "agent", map[string]any{"id": "tsk_1"}).AsToolAction()
	if full.MissingArguments != nil {
		t.Fatalf("a complete action lists %v", *full.MissingArguments)
	}
	path, _ := Tool("teardown_service", "agent", nil).AsToolAction()
	if path.MissingArguments == nil || (*path.MissingArguments)[0] != "id" {
		t.Fatalf("a path argument missing: %v", path.MissingArguments)
	}
}
