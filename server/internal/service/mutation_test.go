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
