package main

import (
	"encoding/json"
	"fmt"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/openapi"
	"github.com/pierhq/pier/server"
)

func TestMain(m *testing.M) {
	testscript.Main(withPostgres{m}, map[string]func(){
		"pier": func() { os.Exit(cli.Main(server.NewCommands()...)) },
		// pier-status runs pier and reports its exit code on stderr as
		// "[exit N]", so scripts can check the code itself.
		"pier-status": func() {
			code := cli.Main(server.NewCommands()...)
			fmt.Fprintf(os.Stderr, "[exit %d]\n", code)
			os.Exit(0)
		},
	})
}

// withPostgres stops the throwaway PostgreSQL cluster after the tests.
type withPostgres struct{ m *testing.M }

func (w withPostgres) Run() int { return testpg.Run(w.m) }

// TestScripts runs the CLI end to end against a real in-process server on
// SQLite: the same binary an operator runs, talking HTTP to the real API.
func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams(""))
}

// TestSandboxScriptOnPostgres runs the sandbox holder flow again with the
// server on PostgreSQL.
func TestSandboxScriptOnPostgres(t *testing.T) {
	p := scriptParams(testpg.NewDatabase(t))
	p.Dir, p.Files = "", []string{"testdata/script/sandbox.txtar"}
	testscript.Run(t, p)
}

func scriptParams(databaseURL string) testscript.Params {
	return testscript.Params{
		Dir:       "testdata/script",
		Cmds:      map[string]func(ts *testscript.TestScript, neg bool, args []string){"jsonget": jsonget, "tamper": tamper, "httpsget": httpsget, "smtpsend": smtpsend},
		Condition: nodeCondition,
		Setup: func(env *testscript.Env) error {
			s, stop, err := testserver.Serve(server.Config{DataDir: env.WorkDir + "/data", HTTPAddr: "127.0.0.1:0", DatabaseURL: databaseURL}, nil)
			if err != nil {
				return err
			}
			env.Defer(func() { stop() })
			env.Setenv("PIER_BASE_URL", "http://"+s.Addr())
			env.Setenv("PIER_TEST_HTTPS_ADDR", s.HTTPSAddr())
			env.Setenv("PIER_TEST_SMTP_ADDR", s.SMTPAddr())
			env.Setenv("PIER_DATA_DIR", env.WorkDir+"/data")
			examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLES", examples)
			env.Setenv("NO_COLOR", "1")
			return nil
		},
	}
}

// jsonget FILE PATH VAR sets $VAR to the string (or number) at the dotted
// PATH of the JSON in FILE (stdout and stderr name the last command's).
func jsonget(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: jsonget FILE PATH VAR")
	}
	var v any
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &v); err != nil {
		ts.Fatalf("%s is not JSON: %v", args[0], err)
	}
	for _, k := range strings.Split(args[1], ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				ts.Fatalf("%s: no element %s", args[1], k)
			}
			v = c[i]
		default:
			ts.Fatalf("%s: no %s", args[1], k)
		}
	}
	switch x := v.(type) {
	case string:
		ts.Setenv(args[2], x)
	case float64:
		ts.Setenv(args[2], strconv.FormatFloat(x, 'f', -1, 64))
	default:
		ts.Fatalf("%s is %v, not a string or number", args[1], v)
	}
}

// smtpsend TO SUBJECT TEXT delivers a message from outside to the
// server's SMTP listener, as another mail server would.
func smtpsend(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: smtpsend TO SUBJECT TEXT")
	}
	msg := "From: sender@example.org\r\nTo: " + args[0] + "\r\nSubject: " + args[1] + "\r\n\r\n" + args[2] + "\r\n"
	err := func() error {
		// Plain SMTP, as from a peer on loopback: smtp.SendMail would take
		// the listener's STARTTLS and refuse its certificate for 127.0.0.1.
		c, err := smtp.Dial(ts.Getenv("PIER_TEST_SMTP_ADDR"))
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.Hello("sender.test"); err != nil {
			return err
		}
		if err := c.Mail("sender@example.org"); err != nil {
			return err
		}
		if err := c.Rcpt(args[0]); err != nil {
			return err
		}
		w, err := c.Data()
		if err != nil {
			return err
		}
		if _, err := w.Write([]byte(msg)); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		return c.Quit()
	}()
	if neg != (err != nil) {
		ts.Fatalf("smtpsend: %v", err)
	}
}

// tamper FILE LINE OLD NEW replaces OLD with NEW on one line of FILE, the
// way someone editing an exported ledger would.
func tamper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: tamper FILE LINE OLD NEW")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	lines := strings.Split(ts.ReadFile(args[0]), "\n")
	if n < 1 || n > len(lines) || !strings.Contains(lines[n-1], args[2]) {
		ts.Fatalf("line %d of %s has no %q", n, args[0], args[2])
	}
	lines[n-1] = strings.Replace(lines[n-1], args[2], args[3], 1)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(strings.Join(lines, "\n")), 0o644))
}

// nodeCondition is [node]: whether node is there to run the JavaScript
// twins. A missing node fails instead when CI=true or
// PIER_TEST_NODE=require.
func nodeCondition(cond string) (bool, error) {
	if cond != "node" {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("PIER_TEST_NODE") == "require" {
			return false, fmt.Errorf("node is required: %v", err)
		}
		return false, nil
	}
	return true, nil
}

// specOperations are SPEC.md §4's rows plus the operations it names only as
// MCP tools. Each must be in the contract, /openapi.json and the CLI tree
// (the MCP endpoint itself is the transport and is neither a tool nor a
// command). server/internal/mcp checks the same list against the tool table.
var specOperations = []struct{ id, method, path string }{
	{"create_signup", "POST", "/v1/signup"},
	{"create_billing_setup_link", "POST", "/v1/billing/setup-link"},
	{"poll_billing", "POST", "/v1/billing/poll"},
	{"search_domains", "GET", "/v1/domains/search"},
	{"estimate", "POST", "/v1/estimate"},
	{"create_quote", "POST", "/v1/quotes"},
	{"launch_service", "POST", "/v1/projects/{id}/launch"},
	{"get_task", "GET", "/v1/tasks/{id}"},
	{"export_project", "POST", "/v1/projects/{id}/export"},
	{"mcp", "POST", "/mcp"},
	{"create_sandbox_session", "POST", "/v1/sandbox/sessions"},
	{"get_sandbox_session", "GET", "/v1/sandbox/sessions/{id}"},
	{"create_sandbox_attempt", "POST", "/v1/sandbox/sessions/{id}/attempts"},
	{"get_sandbox_proof", "GET", "/v1/sandbox/proofs/{proofId}"},
	{"get_sandbox_reference", "GET", "/.well-known/sandbox-reference.json"},
	{"get_reference_proof", "GET", "/reference/sandbox/proof.json"},
	{"get_reference_proof_jwks", "GET", "/reference/sandbox/proof-jwks.json"},
	{"get_reference_issuer_jwks", "GET", "/reference/sandbox/issuer-jwks.json"},
	{"get_reference_provenance", "GET", "/reference/sandbox/provenance.json"},
	{"get_verifier_script", "GET", "/verify-sandbox-proof.mjs"},
	{"get_holder_script", "GET", "/sandbox-holder.mjs"},
	{"upload_assets", "POST", "/v1/bundles"},
	{"prepare_workflow", "POST", "/v1/workflows"},
	{"apply_workflow", "POST", "/v1/workflows/{id}/apply"},
	{"set_registrant_contact", "PUT", "/v1/domains/{domain}/registrant-contact"},
}

func TestEverySpecOperationEverywhere(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	root := cli.NewRootCmd(cmdutil.NewFactory(cmdutil.SystemIOStreams()))
	commands := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if id, ok := c.Annotations[cmdutil.OperationAnnotation]; ok {
			commands[id] = true
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, op := range specOperations {
		got := doc.Paths[op.path][strings.ToLower(op.method)].OperationID
		if got != op.id {
			t.Errorf("%s %s: operationId %q in /openapi.json, want %q", op.method, op.path, got, op.id)
		}
		if op.id == "mcp" {
			continue
		}
		if !commands[op.id] {
			t.Errorf("%s: not in the CLI command tree", op.id)
		}
	}
	if len(commands) == 0 {
		t.Fatal("no operation commands found; annotate them with operationId")
	}
}
