package workflowplan

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// signedPrepared signs a two-step plan and returns the prepared workflow
// a server would answer with (the projection, signedPlan and its state),
// and the JWKS that verifies it.
func signedPrepared(t *testing.T) (data map[string]any, jwks []byte) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := Plan{
		Kind: Kind, WorkflowID: "wfl_1", OrgID: "org_1", ProjectID: "prj_1", PreparedBy: "key_1", PreparedAt: "2026-11-01T10:00:00Z",
		Steps: []Step{
			{ID: "q", Tool: "create_quote", Arguments: map[string]any{"projectId": "prj_1"}, After: []string{}, PriceMicro: 12_000_000},
			{ID: "site", Tool: "launch_service", Arguments: map[string]any{"quoteId": "${steps.q.quoteId}"}, After: []string{"q"}, Irreversible: true, NeedsApproval: true, Approval: "a domain is bought"},
		},
		Versions:   []Version{{Type: "project", ID: "prj_1", Version: "3"}},
		TotalMicro: 12_000_000, SignedByKID: "k1",
	}
	canon, digest, err := Canonical(p)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := Sign(priv, "k1", canon)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(Projection(p, digest, "k1"))
	json.Unmarshal(b, &data)
	data["signedPlan"], data["createdAt"], data["state"] = signed, "2026-11-01T10:00:00Z", "prepared"
	jwks, _ = json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &priv.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	return data, jwks
}

// TestCheckProjection: the projection beside a signed plan must say what
// the plan says. An edited total, tool, price, argument or approval, a
// step added or taken away, and a member the plan does not know are each
// refused, naming the member; the server's state members are only listed
// as unsigned.
func TestCheckProjection(t *testing.T) {
	data, jwks := signedPrepared(t)
	check := func(d map[string]any) ([]string, error) {
		payload, digest, kid, err := Verify(d["signedPlan"].(string), jwks)
		if err != nil {
			t.Fatal(err)
		}
		var p Plan
		json.Unmarshal(payload, &p)
		b, _ := json.Marshal(d)
		return CheckProjection(p, digest, kid, b)
	}
	unsigned, err := check(data)
	if err != nil || strings.Join(unsigned, ",") != "createdAt,state" {
		t.Fatalf("the projection as signed: unsigned %v, %v", unsigned, err)
	}
	step := func(d map[string]any, i int) map[string]any { return d["steps"].([]any)[i].(map[string]any) }
	for _, c := range []struct {
		name string
		edit func(d map[string]any)
		path string
	}{
		{"totalUsd", func(d map[string]any) { d["totalUsd"] = 1.0 }, "data.totalUsd"},
		{"a step's tool", func(d map[string]any) { step(d, 1)["tool"] = "teardown_service" }, "data.steps[1].tool"},
		{"a step's price", func(d map[string]any) { step(d, 0)["priceUsd"] = 0.5 }, "data.steps[0].priceUsd"},
		{"an argument", func(d map[string]any) { step(d, 0)["arguments"].(map[string]any)["projectId"] = "prj_2" }, "data.steps[0].arguments.projectId"},
		{"undo", func(d map[string]any) { step(d, 1)["irreversible"] = false }, "data.steps[1].irreversible"},
		{"the approval dropped", func(d map[string]any) { delete(step(d, 1), "approvalReason") }, "data.steps[1].approvalReason"},
		{"a step removed", func(d map[string]any) { d["steps"] = d["steps"].([]any)[:1] }, "data.steps"},
		{"a member added", func(d map[string]any) { d["note"] = "approved by finance" }, "data.note"},
		{"a step member added", func(d map[string]any) { step(d, 0)["free"] = true }, "data.steps[0].free"},
		{"the digest", func(d map[string]any) { d["digest"] = strings.Repeat("0", 64) }, "data.digest"},
		{"the project", func(d map[string]any) { d["projectId"] = "prj_9" }, "data.projectId"},
		{"the versions", func(d map[string]any) { d["versions"] = []any{} }, "data.versions"},
		{"totalUsd removed", func(d map[string]any) { delete(d, "totalUsd") }, "data.totalUsd"},
	} {
		var d map[string]any // a deep copy
		b, _ := json.Marshal(data)
		json.Unmarshal(b, &d)
		c.edit(d)
		_, err := check(d)
		pe, ok := err.(*ProjectionError)
		if !ok || pe.Path != c.path {
			t.Errorf("%s: %v, want a refusal at %s", c.name, err, c.path)
		}
	}
}
