package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// TestAnonymousOperationsSendNoKey checks that an anonymous operation never
// carries the API key, since holder-authority calls refuse one, and that an
// agent operation does.
func TestAnonymousOperationsSendNoKey(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Idempotency-Key"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data":{"ok":true},"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`)
	}))
	defer srv.Close()

	for _, args := range [][]string{
		{"sandbox", "mandates", "register", "ses_1", "--mandate", "jws", "--registration-secret", "sbr_1", "--idempotency-key", "idk_holder"},
		{"tasks", "get", "tsk_1"},
		{"services", "teardown", "svc_1", "--idempotency-key", "idk_fixed"},
	} {
		f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "pk_secret"})
		if code := run(f, args); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, ts.Err)
		}
		if !strings.Contains(ts.Out.String(), "ok: yes") || !strings.Contains(ts.Out.String(), "stop: done") {
			t.Errorf("%v: output %q", args, ts.Out)
		}
	}
	want := []string{
		"POST /v1/sandbox/sessions/ses_1/mandate  idk_holder",
		"GET /v1/tasks/tsk_1 Bearer pk_secret ",
		"POST /v1/services/svc_1/teardown Bearer pk_secret idk_fixed",
	}
	if strings.Join(auth, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(auth, "\n"), strings.Join(want, "\n"))
	}
}

// TestOutputModes checks --json prints the body byte for byte, and that
// human output has no ANSI codes off a terminal.
func TestOutputModes(t *testing.T) {
	srv := httptest.NewServer(fakeAPI())
	defer srv.Close()
	env := map[string]string{"PIER_BASE_URL": srv.URL}

	f, ts := clitest.NewFactory(env)
	if code := run(f, []string{"estimate", "--workload", "worker", "--json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	resp, err := http.Post(srv.URL+"/v1/estimate", "application/json", strings.NewReader(`{"workload":"worker"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var want strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		want.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if ts.Out.String() != want.String()+"\n" {
		t.Errorf("--json output differs from the body:\n%s\n%s", ts.Out, want.String())
	}

	f, ts = clitest.NewFactory(env)
	f.IO.StdoutIsTerminal = func() bool { return false }
	if code := run(f, []string{"estimate", "--workload", "worker"}); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	if strings.Contains(ts.Out.String(), "\x1b[") {
		t.Errorf("ANSI codes in non-terminal output: %q", ts.Out)
	}
	if ts.Err.Len() != 0 {
		t.Errorf("stderr on success: %q", ts.Err)
	}

	// With --json an error envelope goes to stdout too, and exits non-zero.
	f, ts = clitest.NewFactory(env)
	code := run(f, []string{"quotes", "create", "--project-id", "p", "--items", "[]", "--json"})
	if code != cmdutil.ExitBlocked {
		t.Errorf("exit %d, want %d", code, cmdutil.ExitBlocked)
	}
	if !strings.HasPrefix(ts.Out.String(), `{"blockedBy":"plan:not_implemented"`) {
		t.Errorf("stdout %q", ts.Out)
	}
}

// Every command spells the project --project and reads PIER_PROJECT;
// --project-id still works and is in no help.
func TestProjectFlagEverywhere(t *testing.T) {
	for _, c := range []struct {
		args, env, want string
	}{
		{"services list --project prj_1", "", "projectId=prj_1"},
		{"services list --project-id prj_1", "", "projectId=prj_1"},
		{"services list", "prj_env", "projectId=prj_env"},
		{"services list --project prj_1", "prj_env", "projectId=prj_1"},
		{`quotes create --items []`, "prj_env", `"projectId":"prj_env"`},
		{`quotes create --project prj_1 --items []`, "", `"projectId":"prj_1"`},
		{`bundles missing --project-id prj_1 --manifest []`, "", `"projectId":"prj_1"`},
	} {
		f, ts := clitest.NewFactory(map[string]string{"PIER_PROJECT": c.env})
		var got *cmdutil.OperationOptions
		root := newRootCmd(f, func(o *cmdutil.OperationOptions) error { got = o; return nil })
		if code := cmdutil.Execute(f, root, strings.Fields(c.args)); code != 0 || got == nil {
			t.Fatalf("%s: exit %d\n%s", c.args, code, ts.Err)
		}
		if q := got.Query.Encode(); !strings.Contains(q, c.want) && !strings.Contains(string(got.Body), c.want) {
			t.Errorf("%s (PIER_PROJECT=%q): query %q body %s, want %s", c.args, c.env, q, got.Body, c.want)
		}
	}
	f, ts := clitest.NewFactory(nil)
	root := newRootCmd(f, nil)
	cmdutil.Execute(f, root, []string{"quotes", "create", "--help"})
	if help := ts.Out.String(); !strings.Contains(help, "--project ") || strings.Contains(help, "--project-id") {
		t.Errorf("quotes create --help:\n%s", help)
	}
}

// TestVersionBeforeTheTree: `pier --version` and `pier -v`, answered
// before the command tree is built, print what cobra prints for them.
func TestVersionBeforeTheTree(t *testing.T) {
	for _, flag := range []string{"--version", "-v"} {
		fast, fs := clitest.NewFactory(nil)
		if code := run(fast, []string{flag}); code != 0 {
			t.Fatalf("%s: exit %d", flag, code)
		}
		slow, ss := clitest.NewFactory(nil)
		if code := cmdutil.Execute(slow, NewRootCmd(slow), []string{flag}); code != 0 {
			t.Fatalf("%s through cobra: exit %d: %s", flag, code, ss.Err)
		}
		if fs.Out.String() != ss.Out.String() || fs.Out.String() == "" {
			t.Errorf("%s: %q before the tree, %q through cobra", flag, fs.Out, ss.Out)
		}
	}
}

// pier version --json prints JSON, as every --json does.
func TestVersionJSON(t *testing.T) {
	f, ts := clitest.NewFactory(nil)
	if code := run(f, []string{"version", "--json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(ts.Out.Bytes(), &v); err != nil || v.Version == "" {
		t.Errorf("pier version --json: %q (%v)", ts.Out, err)
	}
}
