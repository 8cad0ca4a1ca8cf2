package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runWith parses args on cmd under a root with the global flags and
// returns the exit code.
func runWith(t *testing.T, f *Factory, cmd *cobra.Command, args ...string) int {
	t.Helper()
	root := newRootCmd(f, nil)
	for _, c := range root.Commands() {
		if c.Name() == cmd.Name() {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(cmd)
	return execute(f, root, append([]string{cmd.Name()}, args...))
}

func TestLaunchOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want LaunchOptions
	}{
		{[]string{"./site"}, LaunchOptions{Dir: "./site", Name: "site", Years: 1, Wait: true}},
		{[]string{"./My Site/", "--project", "prj_1", "--domain", "acme.dev", "--years", "2"}, LaunchOptions{Dir: "./My Site/", Project: "prj_1", Name: "my-site", Domain: "acme.dev", Years: 2, Wait: true}},
		{[]string{"./site", "--name", "web", "--no-wait"}, LaunchOptions{Dir: "./site", Name: "web", Years: 1}},
		{[]string{"./site", "--wait"}, LaunchOptions{Dir: "./site", Name: "site", Years: 1, Wait: true}},
	} {
		f, ts := newTestFactory(map[string]string{})
		var got *LaunchOptions
		cmd := NewCmdLaunch(f, func(o *LaunchOptions) error { got = o; return nil })
		if code := runWith(t, f, cmd, c.args...); code != 0 {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		got.Factory = nil
		if *got != c.want {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, _ := newTestFactory(nil)
	if code := runWith(t, f, NewCmdLaunch(f, func(*LaunchOptions) error { return nil })); code != ExitUsage {
		t.Errorf("launch without a directory: exit %d", code)
	}
}

func TestExportAndUploadOptions(t *testing.T) {
	f, _ := newTestFactory(nil)
	var ex *ExportOptions
	if code := runWith(t, f, NewCmdExport(f, func(o *ExportOptions) error { ex = o; return nil }), "prj_1", "--out", "leave"); code != 0 || ex.Project != "prj_1" || ex.Out != "leave" {
		t.Fatalf("export: exit %d %+v", code, ex)
	}
	f, _ = newTestFactory(nil)
	if code := runWith(t, f, NewCmdExport(f, func(*ExportOptions) error { return nil }), "prj_1"); code != ExitUsage {
		t.Errorf("export without --out: exit %d", code)
	}
	f, _ = newTestFactory(nil)
	var up *UploadOptions
	cmd := NewCmdBundlesUpload(f, func(o *UploadOptions) error { up = o; return nil })
	if code := runWith(t, f, cmd, "./site", "--project", "prj_2"); code != 0 || up.Dir != "./site" || up.Project != "prj_2" {
		t.Fatalf("upload: exit %d %+v", code, up)
	}
}

// fakeLaunchAPI answers a launch's calls with envelopes in the contract's
// shapes (validated as served). decision is the quote's; launchState the
// launch's 202 answer; taskState what polling the task finds.
func fakeLaunchAPI(t *testing.T, decision, launchState, taskState string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	approval := func() string { return srv.URL + "/approvals/gat_1" }
	task := func(state string) string {
		approvalURL, pollAfter, actions := "", "", `[{"kind":"tool","actor":"agent","tool":"get_task","arguments":{"id":"tsk_1"},"http":{"method":"GET","path":"/v1/tasks/tsk_1"},"requiredHeaders":["Authorization"],"retryAfterSeconds":1}]`
		if state == "input_required" {
			approvalURL = fmt.Sprintf(`"approvalUrl":%q,`, approval())
			pollAfter = `"pollAfterSeconds":5,`
			actions = fmt.Sprintf(`[{"kind":"url","actor":"human","id":"approve","purpose":"approve","url":%q},{"kind":"tool","actor":"agent","after":["approve"],"tool":"get_task","arguments":{"id":"tsk_1"},"http":{"method":"GET","path":"/v1/tasks/tsk_1"},"requiredHeaders":["Authorization"],"retryAfterSeconds":5}]`, approval())
		}
		return fmt.Sprintf(`{"actions":%s,"data":{%s"budgetRemainingUsd":100,"httpsReady":{"domain":false,"preview":false},"kind":"launch",%s"pollUrl":"%s/v1/tasks/tsk_1","previewUrl":"https://site--prj-1.localhost:8443/","receipt":{"action":"launch_service","costs":[{"amountUsd":12,"item":"domain:acme.dev"}],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"svc_1","type":"service"},{"id":"tsk_1","type":"task"}],"id":"rcp_1","totalUsd":12},"serviceId":"svc_1","state":%q,"steps":[{"name":"charge","state":"succeeded"},{"name":"register_domain","state":"pending"},{"name":"dns","state":"pending"},{"name":"deploy","state":"pending"},{"name":"tls","state":"pending"}],"taskId":"tsk_1","undo":{"command":null,"irreversible":true,"notReversed":["domain_registration:acme.dev"]}},"formatVersion":"1"}`,
			actions, approvalURL, pollAfter, srv.URL, state)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/bundles", func(w http.ResponseWriter, r *http.Request) {
		writeEnvelope(w, 201, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"budgetRemainingUsd":100,"bundleId":"bnd_1","deduplicated":false,"fileCount":1,"newBlobs":1,"receipt":{"action":"upload_assets","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"bnd_1","type":"bundle"}],"id":"rcp_0","totalUsd":0},"sha256":"4838855e096961ec713e4d2b32cf6aa636cce04ffae0da5ee293d3c32641e1e7","totalBytes":2,"undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`)
	})
	mux.HandleFunc("POST /v1/quotes", func(w http.ResponseWriter, r *http.Request) {
		state, reasons := "held", `[]`
		if decision != "ALLOW" {
			state, reasons = "not_held", `["policy:approval_required"]`
		}
		writeEnvelope(w, 201, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"data":{"amountUsd":12,"budgetRemainingUsd":100,"decision":%q,"gatedSteps":[],"lines":[{"amountUsd":12,"item":"domain:acme.dev"}],"projectId":"prj_1","quoteId":"quo_1","reasons":%s,"receipt":{"action":"create_quote","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"quo_1","type":"quote"}],"id":"rcp_q","totalUsd":0},"state":%q,"undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`, decision, reasons, state))
	})
	mux.HandleFunc("POST /v1/projects/prj_1/launch", func(w http.ResponseWriter, r *http.Request) {
		writeEnvelope(w, 202, task(launchState))
	})
	mux.HandleFunc("GET /v1/tasks/tsk_1", func(w http.ResponseWriter, r *http.Request) {
		writeEnvelope(w, 200, task(taskState))
	})
	srv = httptest.NewServer(validated(mux, func(p []string) { t.Errorf("the fake API drifted from the contract: %v", p) }))
	t.Cleanup(srv.Close)
	return srv
}

// A launch that ends up waiting for a human exits 5 with the approval URL,
// whether its 202 answer already says so (--no-wait included) or the wait
// finds it, and still names the service and its preview URL.
func TestLaunchWaitingForHuman(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                             string
		decision, launchState, taskState string
		noWait                           bool
		want                             int
	}{
		{"no-wait, quote over the approval threshold", "REQUIRES_APPROVAL", "input_required", "input_required", true, ExitInputRequired},
		{"no-wait, answer already input_required", "ALLOW", "input_required", "input_required", true, ExitInputRequired},
		{"wait, quote over the approval threshold", "REQUIRES_APPROVAL", "input_required", "input_required", false, ExitInputRequired},
		{"wait, purchase gated later", "ALLOW", "queued", "input_required", false, ExitInputRequired},
		{"no-wait, queued", "ALLOW", "queued", "queued", true, ExitOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := fakeLaunchAPI(t, c.decision, c.launchState, c.taskState)
			f, ts := newTestFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "pk_test"})
			args := []string{dir, "--project", "prj_1", "--name", "site", "--domain", "acme.dev"}
			if c.noWait {
				args = append(args, "--no-wait")
			}
			code := runWith(t, f, NewCmdLaunch(f, nil), args...)
			out, errOut := ts.out.String(), ts.err.String()
			if code != c.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.want, out, errOut)
			}
			for _, w := range []string{"svc_1", "https://site--prj-1.localhost:8443/", "tsk_1"} {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %s:\n%s", w, out)
				}
			}
			if approval := srv.URL + "/approvals/gat_1"; (c.want == ExitInputRequired) != strings.Contains(errOut, approval) {
				t.Errorf("stderr and the approval URL:\n%s", errOut)
			}
		})
	}
}
