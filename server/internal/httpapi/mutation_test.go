package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/service"
)

func TestMutationValidates(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for name, m := range map[string]sdk.MutationResult{
		"reversible": mutation(now, "launch_service", []service.Cost{{Item: "edge:base", Amount: 0}, {Item: "domain:acme.dev", Amount: 12_000_000}},
			[]sdk.ResourceRef{{Type: "service", Id: "svc_1"}}, undoCall("teardown_service", map[string]any{"id": "svc_1"}), 88_000_000),
		"irreversible": mutation(now, "create_quote", nil, nil, nil, 100_000_000),
	} {
		b, _ := json.Marshal(m)
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err := contracttest.Schema(t, "mutation-result.json").Validate(v); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
	}
	m := mutation(now, "launch_service", []service.Cost{{Item: "a", Amount: 1_500_000}, {Item: "b", Amount: 10_000}}, nil, undoCall("teardown_service", map[string]any{"id": "svc_1"}), 1)
	if m.Receipt.TotalUsd != 1.51 || m.Undo.Irreversible || m.Undo.Command.Http.Path != "/v1/services/svc_1/teardown" {
		t.Fatalf("%+v", m)
	}
	b, _ := json.Marshal(mutation(now, "x", nil, nil, nil, 0).Undo)
	if string(b) != `{"command":null,"irreversible":true}` {
		t.Fatalf("irreversible marker %s", b)
	}
}

// A task keeps its mutation's receipt and undo in the contract's JSON: what
// was kept before reads back the same, and the domain's mutation answers
// the same as the contract's.
func TestKeptReceiptReadsBack(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	m := service.Mutated{
		Receipt: service.Receipt{ID: "rcp_1", Action: "launch_service", Costs: []service.Cost{{Item: "a", Amount: 1_500_000}, {Item: "b", Amount: 10_000}}, Total: 1_510_000,
			Created: []service.Resource{{Type: "service", ID: "svc_1", URL: "https://x.test/"}, {Type: "task", ID: "tsk_1"}}, At: at},
		Undo:            service.Undoing{Call: &service.Reversal{Tool: "teardown_service", Args: map[string]any{"id": "svc_1"}}},
		BudgetRemaining: 1,
	}
	m.Receipt.Kept, m.Undo.NotReversed = []string{"mail_records:a.dev"}, []string{"domain_registration:a.dev"}
	wire := wireMutated(m)
	kept, _ := json.Marshal(map[string]any{"receipt": wire.Receipt, "undo": wire.Undo})
	var pl struct {
		Receipt *service.Receipt `json:"receipt"`
		Undo    *service.Undoing `json:"undo"`
	}
	if err := json.Unmarshal(kept, &pl); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(wireMutated(service.Mutated{Receipt: *pl.Receipt, Undo: *pl.Undo, BudgetRemaining: 1}))
	first, _ := json.Marshal(wire)
	if !bytes.Equal(first, again) || wire.Receipt.TotalUsd != 1.51 || wire.Undo.Command.Http.Path != "/v1/services/svc_1/teardown" {
		t.Fatalf("kept %s\nread back %s", first, again)
	}
	mine, _ := json.Marshal(pl.Receipt)
	var back service.Receipt
	if err := json.Unmarshal(mine, &back); err != nil || back.Total != 1_510_000 || len(back.Created) != 2 || back.Created[0].URL != "https://x.test/" {
		t.Fatalf("receipt %s: %+v %v", mine, back, err)
	}
}
