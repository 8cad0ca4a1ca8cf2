package operations_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmd/operations"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// operationFlagCase is one command line, and the request it should make
// or the usage error it should give.
type operationFlagCase struct {
	name      string
	args      string
	stdin     string
	wantCode  int
	wantErr   string // substring of stderr
	wantPath  string
	wantQuery url.Values
	wantBody  string // exact bytes; "-" means no body
	wantIdem  string
}

func TestOperationFlags(t *testing.T) {
	dir := t.TempDir()
	launchFile := filepath.Join(dir, "launch.json")
	os.WriteFile(launchFile, []byte(`{"name":"from-file","target":"edge","domain":"acme.dev"}`), 0o644)
	filesFile := filepath.Join(dir, "files.json")
	os.WriteFile(filesFile, []byte(`[{"path":"index.html","contentBase64":"aGk="}]`), 0o644)

	var tests []operationFlagCase
	tests = append(tests, queryAndPathFlagCases(launchFile)...)
	tests = append(tests, bodyFlagCases()...)
	tests = append(tests, jsonFlagAndBodylessCases(filesFile)...)
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// queryAndPathFlagCases answers the cases for query strings and path parameters.
func queryAndPathFlagCases(launchFile string) []operationFlagCase {
	return []operationFlagCase{
		{
			name:      "query string, number text and bool",
			args:      "domains search acme --max-first-year-price-usd 12.5 --max-renewal-price-usd 1e2 --include-exotic --limit 5",
			wantPath:  "/v1/domains/search",
			wantQuery: url.Values{"q": {"acme"}, "maxFirstYearPriceUsd": {"12.5"}, "maxRenewalPriceUsd": {"1e2"}, "includeExotic": {"true"}, "limit": {"5"}},
			wantBody:  "-",
		},
		{
			name:      "query list as JSON array is comma-joined",
			args:      `domains search acme --tld-allowlist ["dev","com"] --tld-denylist xyz,biz`,
			wantPath:  "/v1/domains/search",
			wantQuery: url.Values{"q": {"acme"}, "tldAllowlist": {"dev,com"}, "tldDenylist": {"xyz,biz"}},
			wantBody:  "-",
		},
		{
			name:      "bool set to false explicitly",
			args:      "domains search acme --include-exotic=false",
			wantPath:  "/v1/domains/search",
			wantQuery: url.Values{"q": {"acme"}, "includeExotic": {"false"}},
			wantBody:  "-",
		},
		{
			name:     "missing positional query argument",
			args:     "domains search",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "missing argument <q>",
		},
		{
			name:     "path substitution escapes, --data file, idempotency key",
			args:     "projects launch prj/1 --data @" + launchFile + " --name web --idempotency-key idk_1",
			wantPath: "/v1/projects/prj%2F1/launch",
			wantBody: `{"domain":"acme.dev","name":"web","target":"edge"}`,
			wantIdem: "idk_1",
		},
		{
			name:     "two path parameters",
			args:     "sandbox gates decide ses_1 gate_2 --decision jws",
			wantPath: "/v1/sandbox/sessions/ses_1/gates/gate_2/decision",
			wantBody: `{"decision":"jws"}`,
		},
		{
			name:     "missing positional argument",
			args:     "sandbox gates decide ses_1 --decision jws",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "missing argument <gate-id>",
		},
		{
			name:     "extra positional argument",
			args:     "tasks get tsk_1 tsk_2",
			wantCode: cmdutil.ExitUsage,
			wantErr:  `unexpected argument "tsk_2"`,
		},
	}
}

// bodyFlagCases answers the cases for body fields, from flags and from --data.
func bodyFlagCases() []operationFlagCase {
	return []operationFlagCase{
		{
			name:     "number text preserved in the body",
			args:     "estimate --workload static_site --monthly-egress-gb 12.5 --monthly-requests 100000",
			wantPath: "/v1/estimate",
			wantBody: `{"monthlyEgressGb":12.5,"monthlyRequests":100000,"workload":"static_site"}`,
		},
		{
			name:     "not a number",
			args:     "estimate --workload static_site --monthly-egress-gb 12,5",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "not a number",
		},
		{
			name:     "not an integer",
			args:     "estimate --workload static_site --monthly-requests 1.5",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "not an integer",
		},
		{
			name:     "enum refuses other values",
			args:     "estimate --workload spaceship",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "must be one of static_site, dynamic_service",
		},
		{
			name:     "required body field from --data",
			args:     `estimate --data {"workload":"worker","monthlyEgressGb":3.10}`,
			wantPath: "/v1/estimate",
			wantBody: `{"workload":"worker","monthlyEgressGb":3.10}`,
		},
		{
			name:     "flags override --data fields",
			args:     `estimate --data {"workload":"worker","target":"edge"} --workload static_site`,
			wantPath: "/v1/estimate",
			wantBody: `{"target":"edge","workload":"static_site"}`,
		},
		{
			name:     "--data from stdin",
			args:     "estimate --data -",
			stdin:    `{"workload":"worker"}`,
			wantPath: "/v1/estimate",
			wantBody: `{"workload":"worker"}`,
		},
		{
			name:     "--data must be an object",
			args:     "estimate --data [1]",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "--data must be a JSON object",
		},
		{
			name:     "--data must be JSON",
			args:     "estimate --data {workload}",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "--data is not valid JSON",
		},
		{
			name:     "missing required body field",
			args:     "estimate --target edge",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "required flag --workload not set",
		},
	}
}

// jsonFlagAndBodylessCases answers the cases for JSON-valued flags, operations without a body and unknown flags.
func jsonFlagAndBodylessCases(filesFile string) []operationFlagCase {
	return []operationFlagCase{
		{
			name:     "json flag, inline and from a file",
			args:     `quotes create --project-id prj_1 --items [{"kind":"domain","domain":"acme.dev"}]`,
			wantPath: "/v1/quotes",
			wantBody: `{"items":[{"kind":"domain","domain":"acme.dev"}],"projectId":"prj_1"}`,
		},
		{
			name:     "json flag from a file",
			args:     "bundles create --project-id prj_1 --files @" + filesFile,
			wantPath: "/v1/bundles",
			wantBody: `{"files":[{"path":"index.html","contentBase64":"aGk="}],"projectId":"prj_1"}`,
		},
		{
			name:     "json flag must be JSON",
			args:     "quotes create --project-id prj_1 --items nope",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "--items: not valid JSON",
		},
		{
			name:     "optional body with nothing set sends no body",
			args:     "billing setup-link",
			wantPath: "/v1/billing/setup-link",
			wantBody: "-",
		},
		{
			name:     "no body operation",
			args:     "services teardown svc_1",
			wantPath: "/v1/services/svc_1/teardown",
			wantBody: "-",
		},
		{
			name:     "unknown flag",
			args:     "tasks get tsk_1 --nope",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "unknown flag: --nope",
		},
		{
			name:     "idempotency-key only on idempotent operations",
			args:     "tasks get tsk_1 --idempotency-key k",
			wantCode: cmdutil.ExitUsage,
			wantErr:  "unknown flag: --idempotency-key",
		},
	}
}

// check runs the command line and compares what it did with what the
// case wants.
func (tt operationFlagCase) check(t *testing.T) {
	got, code, ts := runCaptured(t, tt.stdin, strings.Fields(tt.args)...)
	if code != tt.wantCode {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, ts.Err)
	}
	if tt.wantErr != "" {
		if !strings.Contains(ts.Err.String(), tt.wantErr) {
			t.Errorf("stderr %q does not contain %q", ts.Err, tt.wantErr)
		}
		if got != nil {
			t.Errorf("the operation ran despite the error")
		}
		return
	}
	if got == nil {
		t.Fatal("no operation ran")
	}
	if got.Path != tt.wantPath {
		t.Errorf("path %q, want %q", got.Path, tt.wantPath)
	}
	if tt.wantQuery != nil && got.Query.Encode() != tt.wantQuery.Encode() {
		t.Errorf("query %q, want %q", got.Query.Encode(), tt.wantQuery.Encode())
	}
	if tt.wantQuery == nil && got.Query != nil {
		t.Errorf("query %q, want none", got.Query.Encode())
	}
	switch {
	case tt.wantBody == "-" && got.Body != nil:
		t.Errorf("body %s, want none", got.Body)
	case tt.wantBody != "-" && string(got.Body) != tt.wantBody:
		t.Errorf("body %s, want %s", got.Body, tt.wantBody)
	}
	if h := got.Header().Get("Idempotency-Key"); h != tt.wantIdem {
		t.Errorf("Idempotency-Key %q, want %q", h, tt.wantIdem)
	}
}

func TestOperationOptionsCarryFlagsAndJSON(t *testing.T) {
	got, code, _ := runCaptured(t, "", "estimate", "--workload", "worker", "--target", "edge", "--json")
	if code != 0 || got == nil {
		t.Fatalf("code %d", code)
	}
	if !got.JSON {
		t.Error("JSON not set")
	}
	if got.Spec.ID != "estimate" {
		t.Errorf("spec %q", got.Spec.ID)
	}
	want := map[string]string{"workload": "worker", "target": "edge"}
	if len(got.Values) != len(want) {
		t.Errorf("values %v, want %v", got.Values, want)
	}
	for k, v := range want {
		if got.Values[k] != v {
			t.Errorf("values[%s] = %q, want %q", k, got.Values[k], v)
		}
	}
}

func TestEnumCompletion(t *testing.T) {
	_, code, ts := runCaptured(t, "", "__complete", "estimate", "--workload", "")
	if code != 0 {
		t.Fatalf("code %d: %s", code, ts.Err)
	}
	for _, w := range []string{"static_site", "mail_enabled_app"} {
		if !strings.Contains(ts.Out.String(), w) {
			t.Errorf("completion %q lacks %s", ts.Out, w)
		}
	}
}

func TestConfigResolution(t *testing.T) {
	f, _ := clitest.NewFactory(map[string]string{"PIER_BASE_URL": "http://env:1", "PIER_API_KEY": "pk_env"})
	if f.BaseURL() != "http://env:1" || f.APIKey() != "pk_env" {
		t.Errorf("env: %q %q", f.BaseURL(), f.APIKey())
	}
	f.Config.BaseURL, f.Config.APIKey = "http://flag:2", "pk_flag"
	if f.BaseURL() != "http://flag:2" || f.APIKey() != "pk_flag" {
		t.Errorf("flags: %q %q", f.BaseURL(), f.APIKey())
	}
	f2, _ := clitest.NewFactory(nil)
	if f2.BaseURL() != cmdutil.DefaultBaseURL || f2.APIKey() != "" {
		t.Errorf("defaults: %q %q", f2.BaseURL(), f2.APIKey())
	}
	f2.Config.BaseURL = "not a url"
	if _, err := f2.Client(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Errorf("bad base URL: %v", err)
	}
}

// signup poll answers at once; with --wait it polls again while the human
// has not finished, and prints the first answer past that.
func TestSignupPollWait(t *testing.T) {
	var polls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/signup/poll", func(w http.ResponseWriter, r *http.Request) {
		state := `"state":"pending_review"`
		if polls.Add(1) > 1 {
			state = `"state":"complete","apiKey":"agk_claimed","organizationId":"org_1","projectId":"prj_1"`
		}
		clitest.WriteEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":{`+state+`},"formatVersion":"1"}`)
	})
	srv := httptest.NewServer(clitest.Validated(mux, func(p []string) { t.Errorf("the fake API drifted from the contract: %v", p) }))
	defer srv.Close()
	args := []string{"signup", "poll", "--claim-secret", "scs_1", "--signup-session-id", "sgn_1", "--json"}

	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL})
	if code := run(f, args); code != 0 || polls.Load() != 1 || !strings.Contains(ts.Out.String(), "pending_review") {
		t.Fatalf("without --wait: exit %d, %d polls: %s%s", code, polls.Load(), ts.Out, ts.Err)
	}
	polls.Store(0)
	f, ts = clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL})
	if code := run(f, append(args, "--wait")); code != 0 || polls.Load() != 2 || !strings.Contains(ts.Out.String(), "agk_claimed") || strings.Contains(ts.Out.String(), "pending_review") {
		t.Fatalf("with --wait: exit %d, %d polls: %s%s", code, polls.Load(), ts.Out, ts.Err)
	}
}

// Every variable setter takes NAME=VALUE, once per variable, as launch
// --env does; a JSON object still works.
func TestVariablesAsAssignments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"services", "env", "set", "svc_1", "--set", "A=1", "--set", "B=two words", "--secrets", "TOKEN"}, `{"secrets":{"TOKEN":"from-env"},"set":{"A":"1","B":"two words"}}`, 0},
		{[]string{"services", "env", "set", "svc_1", "--set", `{"A":"1"}`}, `{"set":{"A":"1"}}`, 0},
		{[]string{"services", "env", "set", "svc_1", "--set", "1A=x"}, "", cmdutil.ExitUsage},
		{[]string{"services", "env", "set", "svc_1", "--set", "A=1", "--set", `{"B":"2"}`}, "", cmdutil.ExitUsage},
	} {
		f, ts := clitest.NewFactory(map[string]string{"TOKEN": "from-env"})
		var got *cmdutil.OperationOptions
		root := newRoot(f, func(o *cmdutil.OperationOptions) error { got = o; return nil })
		code := cmdutil.Execute(f, root, c.args)
		if code != c.code {
			t.Fatalf("%v: exit %d, want %d\n%s", c.args, code, c.code, ts.Err)
		}
		if c.code == 0 && string(got.Body) != c.want {
			t.Errorf("%v: body %s, want %s", c.args, got.Body, c.want)
		}
	}
}

// newRoot is a root with the global flags and the generated commands; a
// non-nil runF replaces their API calls.
func newRoot(f *cmdutil.Factory, runF func(*cmdutil.OperationOptions) error) *cobra.Command {
	root := cmdutil.NewRootCommand(f)
	operations.AddCommands(root, f, runF)
	cmdutil.FinishTree(root)
	return root
}

// run runs args on the generated commands and returns the exit code.
func run(f *cmdutil.Factory, args []string) int {
	return cmdutil.Execute(f, newRoot(f, nil), args)
}

// runCaptured executes args with every operation's API call replaced by a
// capture of its options. It returns the options (nil when no operation
// ran), the exit code and the streams.
func runCaptured(t *testing.T, stdin string, args ...string) (*cmdutil.OperationOptions, int, *clitest.Streams) {
	t.Helper()
	f, ts := clitest.NewFactory(nil)
	ts.In.WriteString(stdin)
	var got *cmdutil.OperationOptions
	code := cmdutil.Execute(f, newRoot(f, func(o *cmdutil.OperationOptions) error {
		got = o
		return nil
	}), args)
	return got, code, ts
}
