package service

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/sdk"
)

func TestMutationValidates(t *testing.T) {
	s := New(Config{Now: func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }})
	for name, m := range map[string]sdk.MutationResult{
		"reversible": s.Mutation("launch_service", []Cost{{"edge:base", 0}, {"domain:acme.dev", 12_000_000}},
			[]sdk.ResourceRef{{Type: "service", Id: "svc_1"}}, UndoCall("teardown_service", map[string]any{"id": "svc_1"}), 88_000_000),
		"irreversible": s.Mutation("create_quote", nil, nil, nil, 100_000_000),
	} {
		b, _ := json.Marshal(m)
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err := contracttest.Schema(t, "mutation-result.json").Validate(v); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
	}
	m := s.Mutation("launch_service", []Cost{{"a", 1_500_000}, {"b", 10_000}}, nil, UndoCall("teardown_service", map[string]any{"id": "svc_1"}), 1)
	if m.Receipt.TotalUsd != 1.51 || m.Undo.Irreversible || m.Undo.Command.Http.Path != "/v1/services/svc_1/teardown" {
		t.Fatalf("%+v", m)
	}
	b, _ := json.Marshal(s.Mutation("x", nil, nil, nil, 0).Undo)
	if string(b) != `{"command":null,"irreversible":true}` {
		t.Fatalf("irreversible marker %s", b)
	}
}

// A task keeps its mutation's receipt and undo in the contract's JSON: what
// was kept before reads back the same, and the domain's mutation answers
// the same as the contract's.
func TestKeptReceiptReadsBack(t *testing.T) {
	s := New(Config{Now: func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }})
	m := s.mutated("launch_service", []Cost{{"a", 1_500_000}, {"b", 10_000}}, []Resource{{Type: "service", ID: "svc_1", URL: "https://x.test/"}, {Type: "task", ID: "tsk_1"}},
		reverse("teardown_service", map[string]any{"id": "svc_1"}), 1)
	m.Receipt.Kept, m.Undo.NotReversed = []string{"mail_records:a.dev"}, []string{"domain_registration:a.dev"}
	wire := m.Wire()
	kept, _ := json.Marshal(map[string]any{"receipt": wire.Receipt, "undo": wire.Undo})
	var pl struct {
		Receipt *Receipt `json:"receipt"`
		Undo    *Undoing `json:"undo"`
	}
	if err := json.Unmarshal(kept, &pl); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(Mutated{Receipt: *pl.Receipt, Undo: *pl.Undo, BudgetRemaining: 1}.Wire())
	first, _ := json.Marshal(wire)
	if !bytes.Equal(first, again) || wire.Receipt.TotalUsd != 1.51 || wire.Undo.Command.Http.Path != "/v1/services/svc_1/teardown" {
		t.Fatalf("kept %s\nread back %s", first, again)
	}
	mine, _ := json.Marshal(pl.Receipt)
	var back Receipt
	if err := json.Unmarshal(mine, &back); err != nil || back.Total != 1_510_000 || len(back.Created) != 2 || back.Created[0].URL != "https://x.test/" {
		t.Fatalf("receipt %s: %+v %v", mine, back, err)
	}
}
