package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

const conformanceVersion = "0.1.16"

// conformanceSuite finds node and the official MCP conformance suite in
// tools/. Without them the test is skipped, unless CI=true or
// PIER_TEST_NODE=require, when it fails.
func conformanceSuite(t *testing.T) (node, cli, shim string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" || os.Getenv("PIER_TEST_NODE") == "require" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (set PIER_TEST_NODE=require to fail instead)", args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed: %v", err)
	}
	tools, _ := filepath.Abs(filepath.Join("..", "..", "..", "tools"))
	pkg := filepath.Join(tools, "node_modules", "@modelcontextprotocol", "conformance")
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		missing("@modelcontextprotocol/conformance is not installed in tools/ (run npm ci --prefix tools): %v", err)
	}
	var p struct{ Version string }
	json.Unmarshal(b, &p)
	if p.Version != conformanceVersion {
		missing("tools/ has @modelcontextprotocol/conformance %s, want %s (run npm ci --prefix tools)", p.Version, conformanceVersion)
	}
	return node, filepath.Join(pkg, "dist", "index.js"), filepath.Join(tools, "shims", "globsync.mjs")
}

type baseline struct {
	Suite            string            `json:"suite"`
	ExpectedFailures map[string]string `json:"expectedFailures"`
}

// The official MCP conformance suite runs its server scenarios against a
// real Pier. Every failure must be in the committed baseline with its
// reason, and every baseline entry must still fail, so the baseline holds
// only what is true today.
func TestConformanceSuite(t *testing.T) {
	node, cli, shim := conformanceSuite(t)
	var want baseline
	b, err := os.ReadFile(filepath.Join("testdata", "conformance-baseline.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for k, reason := range want.ExpectedFailures {
		if strings.TrimSpace(reason) == "" || strings.Contains(reason, "\n") {
			t.Errorf("baseline entry %s needs a one-line reason", k)
		}
	}

	base := testserver.Start(t, server.Config{}).URL
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The shim gives Node 20 the fs.globSync the CLI imports; on Node 22
	// it does nothing.
	cmd := exec.CommandContext(ctx, node, "--import", shim, cli, "server", "--url", base+"/mcp", "--output-dir", out)
	cmd.Dir = t.TempDir()
	log, runErr := cmd.CombinedOutput()
	// The CLI exits non-zero whenever a check fails; what counts is the
	// comparison below.
	got, passed := readChecks(t, out)
	if len(got)+len(passed) == 0 {
		t.Fatalf("the suite reported nothing (%v):\n%s", runErr, log)
	}
	for _, must := range []string{"server-initialize/server-initialize", "ping/ping", "tools-list/tools-list",
		"dns-rebinding-protection/localhost-host-rebinding-rejected", "dns-rebinding-protection/localhost-host-valid-accepted"} {
		if !passed[must] {
			t.Errorf("%s did not pass", must)
		}
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := want.ExpectedFailures[k]; !ok {
			t.Errorf("new failure %s: %s", k, got[k])
		}
	}
	for k := range want.ExpectedFailures {
		if _, ok := got[k]; !ok {
			t.Errorf("baseline entry %s no longer fails: remove it from testdata/conformance-baseline.json", k)
		}
	}
	if t.Failed() {
		t.Logf("suite output:\n%s", log)
	}
}

var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// readChecks reads the suite's checks.json files: failures by
// scenario/check with their messages, and the checks that passed.
func readChecks(t *testing.T, dir string) (failures map[string]string, passed map[string]bool) {
	t.Helper()
	failures, passed = map[string]string{}, map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID           string `json:"id"`
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		for _, c := range checks {
			key := m[1] + "/" + c.ID
			switch c.Status {
			case "FAILURE":
				failures[key] = c.ErrorMessage
			case "SUCCESS":
				passed[key] = true
			}
		}
	}
	return failures, passed
}
