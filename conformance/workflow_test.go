package conformance

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// workflow is the part of a GitHub Actions workflow the test reads.
type workflow struct {
	On struct {
		Push struct {
			Branches []string `yaml:"branches"`
		} `yaml:"push"`
	} `yaml:"on"`
	Concurrency struct {
		Group            string `yaml:"group"`
		CancelInProgress *bool  `yaml:"cancel-in-progress"`
	} `yaml:"concurrency"`
	Jobs map[string]struct {
		Steps []workflowStep `yaml:"steps"`
	} `yaml:"jobs"`
}

type workflowStep struct {
	ID   string            `yaml:"id"`
	Name string            `yaml:"name"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	If   string            `yaml:"if"`
	Env  map[string]string `yaml:"env"`
	With map[string]string `yaml:"with"`
}

// TestPublicConformanceWorkflowChains: the workflow parses, and chains
// its reports across runs. It restores the last saved chain (reports and
// key) from the cache before the suites run, hands the script a report
// directory and a key inside what it restored, saves the same paths under
// the key it restored by once the chain verifies, runs one at a time, and
// uploads the reports but never the key.
func TestPublicConformanceWorkflowChains(t *testing.T) {
	steps := conformanceJobSteps(t)
	find := func(match func(workflowStep) bool) (int, workflowStep) {
		for i, s := range steps {
			if match(s) {
				return i, s
			}
		}
		return -1, workflowStep{}
	}
	ri, restore := find(func(s workflowStep) bool { return strings.HasPrefix(s.Uses, "actions/cache/restore@") })
	si, save := find(func(s workflowStep) bool { return strings.HasPrefix(s.Uses, "actions/cache/save@") })
	xi, run := find(func(s workflowStep) bool {
		return strings.HasPrefix(strings.TrimSpace(s.Run), "bash scripts/conformance.sh")
	})
	ki, keyStep := find(func(s workflowStep) bool { return strings.Contains(s.Run, "CONFORMANCE_KEY=") })
	vi, verify := find(func(s workflowStep) bool { return strings.Contains(s.Run, "conformance verify --chain") })
	ui, upload := find(func(s workflowStep) bool { return strings.HasPrefix(s.Uses, "actions/upload-artifact@") })
	if ri < 0 || si < 0 || xi < 0 || ki < 0 || vi < 0 || ui < 0 {
		t.Fatalf("steps: restore %d, save %d, run %d, key %d, verify %d, upload %d; every one is needed", ri, si, xi, ki, vi, ui)
	}
	if !(ri < ki && ki < xi && xi < vi && vi < si) {
		t.Errorf("order: restore %d, key %d, run %d, verify %d, save %d; want them in that order", ri, ki, xi, vi, si)
	}

	// Restore: a key unique to the run, falling back to the newest chain
	// saved under the prefix; no match means a fresh chain.
	if restore.ID == "" || !strings.Contains(restore.With["key"], "github.run_id") {
		t.Errorf("restore: id %q, key %q: want an id and a key unique to the run", restore.ID, restore.With["key"])
	}
	prefix := strings.TrimSpace(restore.With["restore-keys"])
	if prefix == "" || !strings.HasPrefix(restore.With["key"], prefix) {
		t.Errorf("restore-keys %q is not a prefix of key %q", prefix, restore.With["key"])
	}
	paths := strings.Fields(restore.With["path"])
	within := func(p string) bool {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "$PWD/"), "./")
		for _, root := range paths {
			if p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/") {
				return true
			}
		}
		return false
	}

	// The run writes into, and signs with a key from, what was restored.
	out := run.Env["CONFORMANCE_OUT"]
	if !within(out) {
		t.Errorf("CONFORMANCE_OUT %q is not under the restored paths %v", out, paths)
	}
	if !strings.Contains(verify.Run, strings.TrimSuffix(out, "/")) || verify.If != "always()" || verify.ID == "" {
		t.Errorf("verify step %+v: want it to check %s always, with an id", verify, out)
	}
	var cachedKey string
	for _, line := range strings.Split(keyStep.Run, "\n") {
		if _, v, ok := strings.Cut(line, "CONFORMANCE_KEY="); ok && strings.Contains(v, "conformance-chain") {
			cachedKey, _, _ = strings.Cut(v, "\"")
		}
	}
	if !within(cachedKey) {
		t.Errorf("without the secret the key %q is not under the restored paths %v", cachedKey, paths)
	}

	// Save: the same paths under the key restore computed, and only a
	// chain that verified.
	if got := strings.Fields(save.With["path"]); !slices.Equal(got, paths) {
		t.Errorf("save paths %v, restore paths %v: they must match for the cache to restore", got, paths)
	}
	if want := "${{ steps." + restore.ID + ".outputs.cache-primary-key }}"; save.With["key"] != want {
		t.Errorf("save key %q, want %q", save.With["key"], want)
	}
	if !strings.Contains(save.If, "steps."+verify.ID+".outcome == 'success'") {
		t.Errorf("save if %q: want it only when the chain verified", save.If)
	}

	// Upload: the reports, not the key.
	if up := strings.TrimSuffix(strings.TrimSpace(upload.With["path"]), "/"); up != strings.TrimSuffix(out, "/") || strings.Contains(upload.With["path"], "key") {
		t.Errorf("upload path %q: want exactly the reports, %s", upload.With["path"], out)
	}

	conformanceScriptChains(t)
}

// conformanceJobSteps reads public-conformance.yml, wants it to run on pushes
// to main one run at a time, none cancelled, and answers its conformance
// job's steps.
func conformanceJobSteps(t *testing.T) []workflowStep {
	t.Helper()
	raw, err := os.ReadFile("../.github/workflows/public-conformance.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatalf("public-conformance.yml is not YAML: %v", err)
	}
	if !slices.Contains(wf.On.Push.Branches, "main") {
		t.Errorf("on.push.branches %v lacks main", wf.On.Push.Branches)
	}
	if wf.Concurrency.Group == "" || wf.Concurrency.CancelInProgress == nil || *wf.Concurrency.CancelInProgress {
		t.Errorf("concurrency %+v: runs must queue, one at a time, none cancelled", wf.Concurrency)
	}
	job, ok := wf.Jobs["conformance"]
	if !ok {
		t.Fatal("no conformance job")
	}
	return job.Steps
}

// The script takes the key and starts afresh from a chain that does not
// verify.
func conformanceScriptChains(t *testing.T) {
	t.Helper()
	script, err := os.ReadFile("../scripts/conformance.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`--key "$CONFORMANCE_KEY"`, `holder keygen --key "$CONFORMANCE_KEY"`, `conformance verify --chain "$OUT"`, `--previous "$last"`} {
		if !strings.Contains(string(script), want) {
			t.Errorf("scripts/conformance.sh lacks %s", want)
		}
	}
}
