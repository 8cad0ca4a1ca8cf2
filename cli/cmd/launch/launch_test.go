package launch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

func TestLaunchOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want LaunchOptions
	}{
		{[]string{"./site"}, LaunchOptions{Dir: "./site", Name: "site", Years: 1, Wait: true, Target: "edge"}},
		{[]string{"./My Site/", "--project", "prj_1", "--domain", "acme.dev", "--years", "2"}, LaunchOptions{Dir: "./My Site/", Project: "prj_1", Name: "my-site", Domain: "acme.dev", Years: 2, Wait: true, Target: "edge"}},
		{[]string{"./site", "--name", "web", "--no-wait"}, LaunchOptions{Dir: "./site", Name: "web", Years: 1, Target: "edge"}},
		{[]string{"./site", "--wait"}, LaunchOptions{Dir: "./site", Name: "site", Years: 1, Wait: true, Target: "edge"}},
		{[]string{"./examples/app", "--target", "process"}, LaunchOptions{Dir: "./examples/app", Name: "app", Years: 1, Wait: true, Target: "process"}},
		{[]string{"./api", "--target", "process", "--run", "python3 server.py", "--env", "GREETING=hi=there", "--env", "EMPTY=", "--secret", "TOKEN",
			"--secret", "KEY=k1", "--health-path", "/healthz", "--health-timeout", "90s", "--addon", "managed_postgres"},
			LaunchOptions{Dir: "./api", Name: "api", Years: 1, Wait: true, Target: "process", Run: "python3 server.py",
				Env: map[string]string{"GREETING": "hi=there", "EMPTY": ""}, Secrets: map[string]string{"TOKEN": "from-env", "KEY": "k1"},
				HealthPath: "/healthz", HealthTimeout: 90, Addons: []string{"managed_postgres"}}},
		{[]string{"./w", "--target", "worker", "--health-grace", "5"}, LaunchOptions{Dir: "./w", Name: "w", Years: 1, Wait: true, Target: "worker", HealthGrace: 5}},
		{[]string{"./p", "--target", "process", "--health-timeout", "1500ms"}, LaunchOptions{Dir: "./p", Name: "p", Years: 1, Wait: true, Target: "process", HealthTimeout: 2}},
	} {
		f, ts := clitest.NewFactory(map[string]string{"TOKEN": "from-env"})
		var got *LaunchOptions
		cmd := NewCmdLaunch(f, func(o *LaunchOptions) error { got = o; return nil })
		if code := clitest.RunWith(t, f, cmd, c.args...); code != 0 {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
		}
		got.Factory = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, _ := clitest.NewFactory(nil)
	if code := clitest.RunWith(t, f, NewCmdLaunch(f, func(*LaunchOptions) error { return nil })); code != cmdutil.ExitUsage {
		t.Errorf("launch without a directory: exit %d", code)
	}
	for _, args := range [][]string{
		{"./site", "--target", "lambda"},
		{"./site", "--run", "python3 app.py"},
		{"./site", "--env", "A=1"},
		{"./app", "--target", "process", "--env", "1A=x"},
		{"./app", "--target", "process", "--secret", "UNSET_IN_ENV"},
		{"./app", "--target", "process", "--env", "A=1", "--secret", "A=2"},
		{"./app", "--target", "process", "--health-path", "healthz"},
		{"./app", "--target", "process", "--health-timeout", "11m"},
		{"./app", "--target", "process", "--health-timeout", "soon"},
		{"./app", "--target", "worker", "--health-path", "/"},
		{"./app", "--target", "worker", "--health-timeout", "30s"},
		{"./app", "--target", "process", "--health-grace", "5s"},
		{"./app", "--target", "worker", "--health-grace", "3m"},
		{"./site", "--health-grace", "5s"},
		{"./app", "--target", "process", "--addon", "redis"},
		{"./app", "--target", "process", "--run", " "},
	} {
		f, ts := clitest.NewFactory(nil)
		if code := clitest.RunWith(t, f, NewCmdLaunch(f, func(*LaunchOptions) error { return nil }), args...); code != cmdutil.ExitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, cmdutil.ExitUsage, ts.Err)
		}
	}
	// A health timeout longer than the default --timeout stretches it; an
	// explicit --timeout is kept.
	f, _ = clitest.NewFactory(nil)
	if code := clitest.RunWith(t, f, NewCmdLaunch(f, func(*LaunchOptions) error { return nil }), "./app", "--target", "process", "--health-timeout", "5m"); code != 0 || f.Config.Timeout != 6*time.Minute {
		t.Errorf("--health-timeout 5m: exit %d, timeout %s", code, f.Config.Timeout)
	}
	f, _ = clitest.NewFactory(nil)
	if code := clitest.RunWith(t, f, NewCmdLaunch(f, func(*LaunchOptions) error { return nil }), "./app", "--target", "process", "--health-timeout", "5m", "--timeout", "1m"); code != 0 || f.Config.Timeout != time.Minute {
		t.Errorf("--health-timeout 5m --timeout 1m: exit %d, timeout %s", code, f.Config.Timeout)
	}
}

func TestExportAndUploadOptions(t *testing.T) {
	f, _ := clitest.NewFactory(nil)
	var ex *ExportOptions
	if code := clitest.RunWith(t, f, NewCmdExport(f, func(o *ExportOptions) error { ex = o; return nil }), "prj_1", "--out", "leave"); code != 0 || ex.Project != "prj_1" || ex.Out != "leave" {
		t.Fatalf("export: exit %d %+v", code, ex)
	}
	f, _ = clitest.NewFactory(nil)
	if code := clitest.RunWith(t, f, NewCmdExport(f, func(*ExportOptions) error { return nil }), "prj_1"); code != cmdutil.ExitUsage {
		t.Errorf("export without --out: exit %d", code)
	}
	f, _ = clitest.NewFactory(nil)
	var up *UploadOptions
	cmd := NewCmdBundlesUpload(f, func(o *UploadOptions) error { up = o; return nil })
	if code := clitest.RunWith(t, f, cmd, "./site", "--project", "prj_2"); code != 0 || up.Dir != "./site" || up.Project != "prj_2" {
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
	(&clitest.FakeBlobs{}).Register(t, mux)
	mux.HandleFunc("POST /v1/bundles", func(w http.ResponseWriter, r *http.Request) {
		clitest.WriteEnvelope(w, 201, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"budgetRemainingUsd":100,"bundleId":"bnd_1","deduplicated":false,"fileCount":1,"newBlobs":1,"receipt":{"action":"upload_assets","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"bnd_1","type":"bundle"}],"id":"rcp_0","totalUsd":0},"sha256":"4838855e096961ec713e4d2b32cf6aa636cce04ffae0da5ee293d3c32641e1e7","totalBytes":2,"undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`)
	})
	mux.HandleFunc("POST /v1/quotes", func(w http.ResponseWriter, r *http.Request) {
		state, reasons := "held", `[]`
		if decision != "ALLOW" {
			state, reasons = "not_held", `["policy:approval_required"]`
		}
		clitest.WriteEnvelope(w, 201, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"data":{"amountUsd":12,"budgetRemainingUsd":100,"decision":%q,"gatedSteps":[],"lines":[{"amountUsd":12,"item":"domain:acme.dev"}],"projectId":"prj_1","quoteId":"quo_1","reasons":%s,"receipt":{"action":"create_quote","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"quo_1","type":"quote"}],"id":"rcp_q","totalUsd":0},"state":%q,"undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`, decision, reasons, state))
	})
	mux.HandleFunc("GET /v1/services", func(w http.ResponseWriter, r *http.Request) {
		clitest.WriteEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"services":[]},"formatVersion":"1"}`)
	})
	mux.HandleFunc("GET /v1/domains/{domain}", func(w http.ResponseWriter, r *http.Request) {
		clitest.WriteEnvelope(w, 404, clitest.ErrorEnvelope("not_found:resource", "your organisation owns no domain "+r.PathValue("domain"), false, ""))
	})
	mux.HandleFunc("POST /v1/projects/prj_1/launch", func(w http.ResponseWriter, r *http.Request) {
		clitest.WriteEnvelope(w, 202, task(launchState))
	})
	mux.HandleFunc("GET /v1/tasks/tsk_1", func(w http.ResponseWriter, r *http.Request) {
		clitest.WriteEnvelope(w, 200, task(taskState))
	})
	srv = httptest.NewServer(clitest.Validated(mux, func(p []string) { t.Errorf("the fake API drifted from the contract: %v", p) }))
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
		{"no-wait, quote over the approval threshold", "REQUIRES_APPROVAL", "input_required", "input_required", true, cmdutil.ExitInputRequired},
		{"no-wait, answer already input_required", "ALLOW", "input_required", "input_required", true, cmdutil.ExitInputRequired},
		{"wait, quote over the approval threshold", "REQUIRES_APPROVAL", "input_required", "input_required", false, cmdutil.ExitInputRequired},
		{"wait, purchase gated later", "ALLOW", "queued", "input_required", false, cmdutil.ExitInputRequired},
		{"no-wait, queued", "ALLOW", "queued", "queued", true, cmdutil.ExitOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := fakeLaunchAPI(t, c.decision, c.launchState, c.taskState)
			f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "pk_test"})
			args := []string{dir, "--project", "prj_1", "--name", "site", "--domain", "acme.dev"}
			if c.noWait {
				args = append(args, "--no-wait")
			}
			code := clitest.RunWith(t, f, NewCmdLaunch(f, nil), args...)
			out, errOut := ts.Out.String(), ts.Err.String()
			if code != c.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.want, out, errOut)
			}
			for _, w := range []string{"svc_1", "https://site--prj-1.localhost:8443/", "tsk_1"} {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %s:\n%s", w, out)
				}
			}
			if approval := srv.URL + "/approvals/gat_1"; (c.want == cmdutil.ExitInputRequired) != strings.Contains(errOut, approval) {
				t.Errorf("stderr and the approval URL:\n%s", errOut)
			}
		})
	}
}

// launch --json prints one envelope, the finished task's, so jq reads one
// document; --json-stream prints the bundle, the quote, the launch and the
// task, one a line.
func TestLaunchJSONPrintsOneEnvelope(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag string
		want int
	}{{"--json", 1}, {"--json-stream", 4}} {
		srv := fakeLaunchAPI(t, "ALLOW", "queued", "succeeded")
		f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "pk_test"})
		code := clitest.RunWith(t, f, NewCmdLaunch(f, nil), dir, "--project", "prj_1", "--name", "site", "--domain", "acme.dev", c.flag)
		out := ts.Out.String()
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", c.flag, code, out, ts.Err.String())
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != c.want {
			t.Fatalf("%s: %d envelopes, want %d:\n%s", c.flag, len(lines), c.want, out)
		}
		var last struct {
			Data struct{ PreviewURL, State string }
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Data.State != "succeeded" || last.Data.PreviewURL == "" {
			t.Errorf("%s: the last envelope is not the finished task: %v %s", c.flag, err, lines[len(lines)-1])
		}
	}
}

// export refuses a directory that holds files unless --force, which empties
// it; a new or empty directory needs no flag.
func TestExportRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	empty, full := filepath.Join(dir, "empty"), filepath.Join(dir, "full")
	os.MkdirAll(empty, 0o755)
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "stale.txt"), []byte("old"), 0o644)
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--out", filepath.Join(dir, "new")}, cmdutil.ExitOK},
		{[]string{"--out", empty}, cmdutil.ExitOK},
		{[]string{"--out", full}, cmdutil.ExitUsage},
		{[]string{"--out", full, "--force"}, cmdutil.ExitOK},
	} {
		f, ts := clitest.NewFactory(nil)
		ran := false
		code := clitest.RunWith(t, f, NewCmdExport(f, func(*ExportOptions) error { ran = true; return nil }), append([]string{"prj_1"}, c.args...)...)
		if code != c.want || ran != (c.want == cmdutil.ExitOK) {
			t.Errorf("export %v: exit %d (ran %v), want %d\n%s", c.args, code, ran, c.want, ts.Err.String())
		}
		if code == cmdutil.ExitUsage && !strings.Contains(ts.Err.String(), "--force") {
			t.Errorf("the refusal does not name --force:\n%s", ts.Err.String())
		}
	}
	if err := emptyDir(full); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(full); len(entries) != 0 {
		t.Errorf("--force left %d entries", len(entries))
	}
}
