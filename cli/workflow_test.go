package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestExampleWorkflowsRead(t *testing.T) {
	files, err := filepath.Glob("../examples/workflow/*.yaml")
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

func TestSignedPlanIn(t *testing.T) {
	for name, in := range map[string]string{
		"envelope": `{"data":{"signedPlan":"a.b.c","digest":"d"}}`,
		"data":     `{"signedPlan":"a.b.c","digest":"d"}`,
		"bare":     "a.b.c\n",
	} {
		signed, _, err := signedPlanIn([]byte(in))
		if err != nil || signed != "a.b.c" {
			t.Errorf("%s: %q %v", name, signed, err)
		}
	}
	if _, _, err := signedPlanIn([]byte(`{"other":1}`)); err == nil {
		t.Error("a file without a signed plan passes")
	}
}
