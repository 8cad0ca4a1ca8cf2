package workflow

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
	"github.com/pierhq/pier/internal/lib/workflowplan"
)

func TestExampleWorkflowsRead(t *testing.T) {
	files, err := filepath.Glob("../../../examples/workflow/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example workflows: %v", err)
	}
	env := map[string]string{"PIER_PROJECT": "prj_example", "PIER_BUNDLE": "bnd_example", "DOMAIN": "example.dev",
		"REGISTRANT_NAME": "Ada Lovelace", "REGISTRANT_EMAIL": "ada@example.dev", "REGISTRANT_COUNTRY": "GB"}
	for _, f := range files {
		req, err := readWorkflow(f, func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if req.ProjectId != "prj_example" || len(req.Steps) == 0 {
			t.Fatalf("%s: %+v", f, req)
		}
		if _, err := readWorkflow(f, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "not set in the environment") {
			t.Fatalf("%s: unset variables pass: %v", f, err)
		}
	}
}

func TestPreparedIn(t *testing.T) {
	for name, in := range map[string]string{
		"envelope": `{"data":{"signedPlan":"a.b.c","digest":"d"}}`,
		"data":     `{"signedPlan":"a.b.c","digest":"d"}`,
		"bare":     "a.b.c\n",
	} {
		pf, err := preparedIn([]byte(in))
		if err != nil || pf.signed != "a.b.c" {
			t.Errorf("%s: %+v %v", name, pf, err)
		}
	}
	if _, err := preparedIn([]byte(`{"other":1}`)); err == nil {
		t.Error("a file without a signed plan passes")
	}
}

// TestWorkflowVerifyWholeEnvelope: pier workflow verify checks the whole
// prepared envelope against its signed plan, not only the plan: an
// envelope whose unsigned totalUsd or a step's tool was edited, or whose
// apply action carries another signed plan, is refused with exit 1 naming
// the member; the envelope as signed passes, listing its unsigned state.
func TestWorkflowVerifyWholeEnvelope(t *testing.T) {
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	plan := workflowplan.Plan{Kind: workflowplan.Kind, WorkflowID: "wfl_1", OrgID: "org_1", ProjectID: "prj_1", PreparedBy: "key_1",
		PreparedAt: "2026-11-01T10:00:00Z", SignedByKID: "k1", TotalMicro: 12_000_000, Versions: []workflowplan.Version{},
		Steps: []workflowplan.Step{{ID: "q", Tool: "create_quote", Arguments: map[string]any{"projectId": "prj_1"}, After: []string{}, PriceMicro: 12_000_000}}}
	canon, digest, _ := workflowplan.Canonical(plan)
	signed, err := workflowplan.Sign(priv, "k1", canon)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &priv.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	jwksPath := filepath.Join(dir, "jwks.json")
	os.WriteFile(jwksPath, jwks, 0o644)

	envelope := func(edit func(data map[string]any, env map[string]any)) string {
		data := workflowplan.Projection(plan, digest, "k1")
		data["signedPlan"], data["createdAt"], data["state"] = signed, "2026-11-01T10:00:00Z", "prepared"
		var d map[string]any
		b, _ := json.Marshal(data)
		json.Unmarshal(b, &d)
		env := map[string]any{"ok": true, "data": d, "nextActions": []any{
			map[string]any{"kind": "tool", "tool": "apply_workflow", "arguments": map[string]any{"id": "wfl_1", "signedPlan": signed}},
		}}
		if edit != nil {
			edit(d, env)
		}
		b, _ = json.Marshal(env)
		path := filepath.Join(dir, "prepared.json")
		os.WriteFile(path, b, 0o644)
		return path
	}
	verify := func(path string) (int, string, string) {
		t.Helper()
		f, ts := clitest.NewFactory(nil)
		code := clitest.RunWith(t, f, NewCmdWorkflowVerify(f, nil), path, "--jwks", jwksPath)
		return code, ts.Out.String(), ts.Err.String()
	}

	if code, out, errOut := verify(envelope(nil)); code != cmdutil.ExitOK || !strings.Contains(out, "checked the signed plan and the whole envelope") || !strings.Contains(out, "unsigned createdAt, state") {
		t.Fatalf("the envelope as signed: exit %d:\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		name string
		edit func(data, env map[string]any)
		want string
	}{
		{"totalUsd", func(d, _ map[string]any) { d["totalUsd"] = 1.5 }, "data.totalUsd reads 1.5 but the signed plan says 12"},
		{"a step's tool", func(d, _ map[string]any) { d["steps"].([]any)[0].(map[string]any)["tool"] = "launch_service" }, "data.steps[0].tool"},
		{"the apply action's plan", func(_, env map[string]any) {
			env["nextActions"].([]any)[0].(map[string]any)["arguments"].(map[string]any)["signedPlan"] = "a.b.c"
		}, "nextActions[0].arguments.signedPlan"},
	} {
		code, _, errOut := verify(envelope(c.edit))
		if code != cmdutil.ExitError || !strings.Contains(errOut, c.want) {
			t.Errorf("%s edited: exit %d: %s", c.name, code, errOut)
		}
	}
}
