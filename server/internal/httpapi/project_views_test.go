package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/pierhq/pier/server/internal/service"
)

// A deleted project answers its deletion again as it was first answered:
// what the contract wrote, read back into the domain and mapped again, is
// the same JSON.
func TestDeletionReplaysAsAnswered(t *testing.T) {
	kept := `{"budgetRemainingUsd":71.25,"canceledTaskIds":["tsk_2"],"deletedAt":"2026-11-27T08:00:00Z","name":"probe",` +
		`"parentProjectId":"prj_1","projectId":"prj_2","receipt":{"action":"delete_project","costs":[],"createdAt":"2026-11-27T08:00:00Z",` +
		`"createdResources":[],"id":"rcp_1","kept":["receipts_and_ledger:prj_2"],"totalUsd":0},"returnedUsd":29.5,"state":"deleted",` +
		`"teardownTaskIds":["tsk_1"],"undo":{"command":null,"irreversible":true}}`
	var d service.ProjectDeletion
	if err := json.Unmarshal([]byte(kept), &d); err != nil {
		t.Fatal(err)
	}
	if d.State != service.ProjectDeleted || d.Returned != 29_500_000 || d.Mutated.BudgetRemaining != 71_250_000 {
		t.Fatalf("read %+v", d)
	}
	b, err := json.Marshal(projectDeletion(&d))
	if err != nil || string(b) != kept {
		t.Fatalf("answered\n%s\nreplayed\n%s (%v)", kept, b, err)
	}
	if acts := deletionActions(&d); len(acts) != 2 {
		t.Fatalf("actions %+v", acts)
	}
	// What the domain keeps reads back the same.
	again, _ := json.Marshal(d)
	var d2 service.ProjectDeletion
	if err := json.Unmarshal(again, &d2); err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(projectDeletion(&d2)); string(b2) != kept {
		t.Fatalf("kept by the domain, replayed\n%s", b2)
	}
}
