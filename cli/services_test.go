package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServices answers the calls of a process launch, pier logs and pier
// rollback with envelopes in the contract's shapes, each validated as it is
// served, and records what the CLI sent.
type fakeServices struct {
	t *testing.T

	// existing: the project already runs "api" as svc_1 (version 1), so a
	// launch is its version 2.
	existing bool
	// states is what polling the launch task finds, one per poll, the last
	// repeated: queued, start, deploy, succeeded or failed.
	states []string
	// launchError, when set, is the launch's error envelope (status 422).
	launchError string
	// rollbackFails makes the rollback task fail with service:unhealthy.
	rollbackFails bool
	// lines are the service's log lines, seq 1, 2, … in order.
	lines []string
	// tornDown: get_service finds svc_1 torn down.
	tornDown bool

	mu          sync.Mutex
	follows     int
	launchBody  map[string]any
	quotes      []map[string]any
	rollback    []map[string]any
	logQueries  []url.Values
	taskPolls   map[string]int
	serviceRead int

	srv *httptest.Server
}

func newFakeServices(t *testing.T, fs *fakeServices) *fakeServices {
	t.Helper()
	fs.t, fs.taskPolls = t, map[string]int{}
	mux := http.NewServeMux()
	(&fakeBlobs{}).register(t, mux)
	mux.HandleFunc("POST /v1/bundles", fs.createBundle)
	mux.HandleFunc("POST /v1/quotes", fs.createQuote)
	mux.HandleFunc("GET /v1/services", fs.listServices)
	mux.HandleFunc("POST /v1/projects/prj_1/launch", fs.launch)
	mux.HandleFunc("GET /v1/tasks/{id}", fs.getTask)
	mux.HandleFunc("GET /v1/services/svc_1", fs.getService)
	mux.HandleFunc("GET /v1/services/svc_1/logs", fs.serviceLogs)
	mux.HandleFunc("POST /v1/services/svc_1/rollback", fs.rollbackService)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeEnvelope(w, 404, errorEnvelope("not_found:resource", "nothing at "+r.URL.Path, false, ""))
	})
	fs.srv = httptest.NewServer(fs.checkedAgainstTheContract(mux))
	t.Cleanup(fs.srv.Close)
	return fs
}

// createBundle answers upload_assets with one bundle.
func (fs *fakeServices) createBundle(w http.ResponseWriter, r *http.Request) {
	writeEnvelope(w, 201, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"budgetRemainingUsd":100,"bundleId":"bnd_1","deduplicated":false,"fileCount":2,"newBlobs":2,"receipt":{"action":"upload_assets","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"bnd_1","type":"bundle"}],"id":"rcp_0","totalUsd":0},"sha256":"4838855e096961ec713e4d2b32cf6aa636cce04ffae0da5ee293d3c32641e1e7","totalBytes":40,"undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`)
}

// createQuote records the quote asked for and holds $7 for it.
func (fs *fakeServices) createQuote(w http.ResponseWriter, r *http.Request) {
	fs.mu.Lock()
	fs.quotes = append(fs.quotes, readBody(fs.t, r))
	fs.mu.Unlock()
	writeEnvelope(w, 201, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"amountUsd":7,"budgetRemainingUsd":100,"decision":"ALLOW","gatedSteps":[],"lines":[{"amountUsd":7,"item":"service:api"}],"projectId":"prj_1","quoteId":"quo_1","reasons":[],"receipt":{"action":"create_quote","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"quo_1","type":"quote"}],"id":"rcp_q","totalUsd":0},"state":"held","undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`)
}

// listServices answers the project's services: a failed one, and svc_1 when it exists.
func (fs *fakeServices) listServices(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("projectId") != "prj_1" {
		fs.t.Errorf("list_services without the project: %s", r.URL.RawQuery)
	}
	list := `{"id":"svc_0","projectId":"prj_1","name":"api","target":"process","state":"failed","previewUrl":"https://api-0--prj-1.localhost:8443/","taskId":"tsk_0","createdAt":"2026-11-25T07:16:17Z","updatedAt":"2026-11-25T07:16:17Z"}`
	if fs.existing {
		list = fs.service("live", 1) + "," + list
	}
	writeEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"services":[`+list+`]},"formatVersion":"1"}`)
}

// launch records the launch and queues tsk_2, or answers launchError.
func (fs *fakeServices) launch(w http.ResponseWriter, r *http.Request) {
	fs.mu.Lock()
	fs.launchBody = readBody(fs.t, r)
	fs.mu.Unlock()
	if fs.launchError != "" {
		writeEnvelope(w, 422, fs.launchError)
		return
	}
	writeEnvelope(w, 202, fs.task("tsk_2", "queued"))
}

// getTask answers each poll of a task with the next of its states; the rollback
// task tsk_3 starts, then succeeds or fails.
func (fs *fakeServices) getTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	fs.mu.Lock()
	n := fs.taskPolls[id]
	fs.taskPolls[id]++
	fs.mu.Unlock()
	if id == "tsk_3" {
		state := "succeeded"
		if fs.rollbackFails {
			state = "failed"
		}
		if n == 0 {
			state = "start"
		}
		writeEnvelope(w, 200, fs.task(id, state))
		return
	}
	states := fs.states
	if len(states) == 0 {
		states = []string{"succeeded"}
	}
	writeEnvelope(w, 200, fs.task(id, states[min(n, len(states)-1)]))
}

// getService answers svc_1, torn down after two follows or when tornDown.
func (fs *fakeServices) getService(w http.ResponseWriter, r *http.Request) {
	fs.mu.Lock()
	fs.serviceRead++
	state := "live"
	if fs.follows >= 2 || fs.tornDown {
		state = "torn_down"
	}
	fs.mu.Unlock()
	writeEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":`+fs.service(state, fs.newVersion())+`,"formatVersion":"1"}`)
}

// serviceLogs answers the log lines after after, at most tail of them, as an
// envelope or, for a follow, as NDJSON.
func (fs *fakeServices) serviceLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fs.mu.Lock()
	fs.logQueries = append(fs.logQueries, q)
	fs.mu.Unlock()
	after, _ := strconv.Atoi(q.Get("after"))
	tail, _ := strconv.Atoi(q.Get("tail"))
	var lines []string
	for i, text := range fs.lines {
		if seq := i + 1; seq > after {
			lines = append(lines, fmt.Sprintf(`{"seq":%d,"at":"2026-11-25T07:16:%02d.5Z","stream":%q,"version":%d,"text":%q}`, seq, 17+i, streamOf(text), fs.newVersion(), strings.TrimPrefix(strings.TrimPrefix(text, "!"), "#")))
		}
	}
	if tail > 0 && after == 0 && len(lines) > tail {
		lines = lines[len(lines)-tail:]
	} else if tail > 0 && len(lines) > tail {
		lines = lines[:tail]
	}
	if q.Get("follow") == "true" && strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") {
		fs.mu.Lock()
		fs.follows++
		fs.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range lines {
			io.WriteString(w, l+"\n\n") // a blank line is a keep-alive
		}
		return
	}
	next := after
	if len(lines) > 0 {
		var last struct{ Seq int }
		json.Unmarshal([]byte(lines[len(lines)-1]), &last)
		next = last.Seq
	}
	writeEnvelope(w, 200, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"data":{"serviceId":"svc_1","lines":[%s],"nextAfter":%d},"formatVersion":"1"}`, strings.Join(lines, ","), next))
}

// rollbackService records the rollback asked for and queues tsk_3.
func (fs *fakeServices) rollbackService(w http.ResponseWriter, r *http.Request) {
	fs.mu.Lock()
	fs.rollback = append(fs.rollback, readBody(fs.t, r))
	fs.mu.Unlock()
	writeEnvelope(w, 202, fs.task("tsk_3", "queued"))
}

// checkedAgainstTheContract serves mux with every answer validated: by
// the contract's validator, or line by line for a follow.
func (fs *fakeServices) checkedAgainstTheContract(mux *http.ServeMux) http.Handler {
	checked := validated(mux, func(p []string) { fs.t.Errorf("the fake API drifted from the contract: %v", p) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") != "true" {
			checked.ServeHTTP(w, r)
			return
		}
		// The contract's validator does not read NDJSON: each line is
		// checked here against LogLine instead.
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		if ct := rec.Header().Get("Content-Type"); rec.Code == 200 && ct != "application/x-ndjson" {
			fs.t.Errorf("a follow answered %s", ct)
		}
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if line != "" {
				checkLogLine(fs.t, line)
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// checkLogLine checks one NDJSON line against the contract's LogLine:
// seq, at, stream and text required, version optional, nothing else.
func checkLogLine(t *testing.T, line string) {
	t.Helper()
	var l map[string]any
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		t.Errorf("an NDJSON line that is not JSON: %q", line)
		return
	}
	for _, k := range []string{"seq", "at", "stream", "text"} {
		if _, ok := l[k]; !ok {
			t.Errorf("a LogLine without %s: %s", k, line)
		}
	}
	for k := range l {
		if !strings.Contains(" seq at stream version text ", " "+k+" ") {
			t.Errorf("a LogLine with %s, which the contract does not have: %s", k, line)
		}
	}
	if s, _ := l["stream"].(string); s != "stdout" && s != "stderr" && s != "system" {
		t.Errorf("a LogLine on stream %q", s)
	}
	if at, _ := l["at"].(string); at != "" {
		if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
			t.Errorf("a LogLine at %q: %v", at, err)
		}
	}
}

// streamOf reads a fake line's stream from its first character: ! for
// stderr, # for system, stdout otherwise.
func streamOf(text string) string {
	switch {
	case strings.HasPrefix(text, "!"):
		return "stderr"
	case strings.HasPrefix(text, "#"):
		return "system"
	}
	return "stdout"
}

func (fs *fakeServices) newVersion() int {
	if fs.existing {
		return 2
	}
	return 1
}

func (fs *fakeServices) service(state string, serving int) string {
	versions := `{"number":1,"state":"starting","taskId":"tsk_2","createdAt":"2026-11-25T07:16:17Z"}`
	if fs.existing {
		versions = `{"number":2,"state":"starting","taskId":"tsk_2","createdAt":"2026-11-25T07:16:17Z"},{"number":1,"state":"live","taskId":"tsk_1","createdAt":"2026-11-25T07:16:17Z"}`
	}
	return fmt.Sprintf(`{"id":"svc_1","projectId":"prj_1","name":"api","target":"process","state":%q,"previewUrl":"https://api--prj-1.localhost:8443/","version":%d,"versions":[%s],"health":{"state":"healthy","restarts":0},"taskId":"tsk_2","createdAt":"2026-11-25T07:16:17Z","updatedAt":"2026-11-25T07:16:17Z"}`,
		state, serving, versions)
}

// task renders the launch (tsk_2) or rollback (tsk_3) task in a state.
func (fs *fakeServices) task(id, state string) string {
	kind, version, previous := "launch", fs.newVersion(), 0
	if fs.existing {
		kind, previous = "deploy", 1
	}
	if id == "tsk_3" {
		kind, version, previous = "rollback", 1, 2
	}
	steps := map[string]string{"start": "pending", "deploy": "pending"}
	taskState, result := "running", ""
	switch state {
	case "queued":
		taskState = "queued"
	case "start":
		steps["start"] = "running"
	case "deploy":
		steps["start"], steps["deploy"] = "succeeded", "running"
	case "succeeded":
		taskState, steps["start"], steps["deploy"] = "succeeded", "succeeded", "succeeded"
		result = fmt.Sprintf(`,"result":{"serviceId":"svc_1","version":%d,"previewUrl":"https://api--prj-1.localhost:8443/"%s}`, version, map[bool]string{true: fmt.Sprintf(`,"previous":%d`, previous)}[previous > 0])
	case "failed":
		taskState, steps["start"], steps["deploy"] = "failed", "failed", "skipped"
		result = fmt.Sprintf(`,"result":{"serviceId":"svc_1","version":%d,"blockedBy":"service:unhealthy","message":"version %d of api never became healthy: no healthy answer within 1s\nlast lines:\nbooting\nImportError: no module named flask","retryable":false,"chargedUsd":0,"refundedUsd":7,"actions":[{"kind":"tool","actor":"agent","tool":"get_service_logs","arguments":{"id":"svc_1","version":%d},"http":{"method":"GET","path":"/v1/services/svc_1/logs"},"requiredHeaders":["Authorization"]}]}`, version, version, version)
	}
	actions := fmt.Sprintf(`[{"kind":"tool","actor":"agent","tool":"get_task","arguments":{"id":%q},"http":{"method":"GET","path":"/v1/tasks/%s"},"requiredHeaders":["Authorization"],"retryAfterSeconds":1}]`, id, id)
	if taskState == "succeeded" || taskState == "failed" {
		actions = `[{"kind":"stop","reason":"done"}]`
	}
	return fmt.Sprintf(`{"actions":%s,"data":{"taskId":%q,"kind":%q,"state":%q,"steps":[{"name":"start","state":%q},{"name":"deploy","state":%q}],"pollUrl":"%s/v1/tasks/%s","serviceId":"svc_1","previewUrl":"https://api--prj-1.localhost:8443/",%s%s},"formatVersion":"1"}`,
		actions, id, kind, taskState, steps["start"], steps["deploy"], fs.srv.URL, id, fakeMutation(id), result)
}

func readBody(t *testing.T, r *http.Request) map[string]any {
	t.Helper()
	var m map[string]any
	b, _ := io.ReadAll(r.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("%s %s: body is not JSON: %s", r.Method, r.URL.Path, b)
		}
	}
	return m
}

func appDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "api")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"Procfile": "web: python3 app.py\n", "app.py": "print('hi')\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func (fs *fakeServices) factory() (*Factory, *testStreams) {
	return newTestFactory(map[string]string{"PIER_BASE_URL": fs.srv.URL, "PIER_API_KEY": "pk_test"})
}

func toJSONText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A first launch of a process quotes it as a service, sends its command,
// variables and health check, prints the first log lines while it waits,
// then the preview URL, the service and its version.
func TestLaunchProcess(t *testing.T) {
	fs := newFakeServices(t, &fakeServices{states: []string{"queued", "start", "start", "deploy", "succeeded"},
		lines: []string{"#starting version 1: python3 app.py", "listening on 127.0.0.1:5000", "#version 1 is healthy"}})
	f, ts := fs.factory()
	code := runWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "process", "--run", "python3 app.py",
		"--env", "GREETING=hello", "--secret", "API_TOKEN=s3cr3t", "--health-path", "/healthz", "--health-timeout", "30")
	out, errOut := ts.out.String(), ts.err.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if len(fs.quotes) != 1 {
		t.Fatalf("%d quotes, want 1", len(fs.quotes))
	}
	if got := toJSONText(fs.quotes[0]["items"]); got != `[{"kind":"service","months":1,"name":"api","target":"process","workload":"dynamic_service"}]` {
		t.Errorf("quote items: %s", got)
	}
	want := `{"bundleId":"bnd_1","env":{"GREETING":"hello"},"healthCheck":{"path":"/healthz","timeoutSeconds":30},"name":"api","quoteId":"quo_1","run":"python3 app.py","secrets":{"API_TOKEN":"s3cr3t"},"target":"process"}`
	if got := toJSONText(fs.launchBody); got != want {
		t.Errorf("launch body:\n%s\nwant\n%s", got, want)
	}
	for _, w := range []string{"… quoting api\n", "… start (running)\n", "  system starting version 1: python3 app.py\n", "  stdout listening on 127.0.0.1:5000\n", "  system version 1 is healthy\n", "… deploy (running)\n"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if strings.Count(errOut, "listening on") != 1 {
		t.Errorf("a log line printed twice:\n%s", errOut)
	}
	wantOut := "https://api--prj-1.localhost:8443/\nservice svc_1\nversion 1\ntask    tsk_2 (succeeded)\nNext: pier logs svc_1 --follow\n      pier services get svc_1\n      pier services teardown svc_1\n"
	if out != wantOut {
		t.Errorf("stdout:\n%s\nwant\n%s", out, wantOut)
	}
	// The logs were read for the launch's version, on from the last line;
	// only reads on from a line wait for more.
	if q := fs.logQueries[0]; q.Get("waitSeconds") != "0" || q.Get("after") != "" {
		t.Errorf("the first log read: %v", q)
	}
	var sawAfter bool
	for _, q := range fs.logQueries {
		if q.Get("version") != "1" {
			t.Errorf("log read without the version: %v", q)
		}
		sawAfter = sawAfter || q.Get("after") == "3"
		if q.Get("after") != "" && q.Get("waitSeconds") != "1" && q.Get("after") != "3" {
			t.Errorf("a read on from a line that does not wait: %v", q)
		}
	}
	if !sawAfter {
		t.Errorf("the log reads never went on from the last line: %v", fs.logQueries)
	}
}

// A launch of a name the project already runs is a new version: no quote,
// and the output says which version serves and how to roll back.
func TestLaunchProcessRelaunch(t *testing.T) {
	fs := newFakeServices(t, &fakeServices{existing: true, states: []string{"start", "succeeded"}, lines: []string{"listening again"}})
	f, ts := fs.factory()
	code := runWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "process")
	out, errOut := ts.out.String(), ts.err.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if len(fs.quotes) != 0 {
		t.Errorf("a relaunch was quoted: %v", fs.quotes)
	}
	if got := toJSONText(fs.launchBody); got != `{"bundleId":"bnd_1","name":"api","target":"process"}` {
		t.Errorf("launch body: %s", got)
	}
	if !strings.Contains(errOut, "a new version of svc_1") || !strings.Contains(errOut, "  stdout listening again") {
		t.Errorf("stderr:\n%s", errOut)
	}
	if !strings.Contains(out, "version 2 (was 1)\n") || !strings.Contains(out, "pier rollback svc_1\n") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, q := range fs.logQueries {
		if q.Get("version") != "2" {
			t.Errorf("a relaunch read the logs of another version: %v", q)
		}
	}
}

// A version that never becomes healthy prints the result's message, with
// its last log lines, and the action to read the logs, and exits 10.
func TestLaunchProcessUnhealthy(t *testing.T) {
	fs := newFakeServices(t, &fakeServices{states: []string{"start", "failed"}, lines: []string{"booting", "!ImportError: no module named flask"}})
	f, ts := fs.factory()
	code := runWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "process")
	out, errOut := ts.out.String(), ts.err.String()
	if code != ExitServiceFailed {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, ExitServiceFailed, out, errOut)
	}
	for _, w := range []string{
		"  stderr ImportError: no module named flask\n",
		"error: task tsk_2 failed: service:unhealthy: version 1 of api never became healthy: no healthy answer within 1s\n  last lines:\n  booting\n  ImportError: no module named flask\n",
		"pier services logs svc_1 --version 1",
	} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}

// A worker with the PostgreSQL add-on is quoted as a database-backed app on
// the worker target; a typed refusal of the launch exits with its code.
func TestLaunchWorkerQuoteAndRefusal(t *testing.T) {
	fs := newFakeServices(t, &fakeServices{launchError: errorEnvelope("plan:no_command", "a worker launch needs a command: add a Procfile", false, "")})
	f, ts := fs.factory()
	code := runWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "worker", "--name", "api", "--addon", "managed_postgres", "--health-grace", "2s")
	if code != ExitBlocked {
		t.Fatalf("exit %d, want %d\n%s", code, ExitBlocked, ts.err)
	}
	if got := toJSONText(fs.quotes[0]["items"]); got != `[{"kind":"service","months":1,"name":"api","target":"worker","workload":"database_backed_app"}]` {
		t.Errorf("quote items: %s", got)
	}
	if got := toJSONText(fs.launchBody["addons"]); got != `["managed_postgres"]` {
		t.Errorf("addons: %s", got)
	}
	if got := toJSONText(fs.launchBody["healthCheck"]); got != `{"graceSeconds":2}` {
		t.Errorf("healthCheck: %s", got)
	}
	if !strings.Contains(ts.err.String(), "plan:no_command") {
		t.Errorf("stderr: %s", ts.err)
	}
}

func TestLogsOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want LogsOptions
	}{
		{[]string{"svc_1"}, LogsOptions{ServiceID: "svc_1"}},
		{[]string{"svc_1", "-f", "--tail", "5", "--version", "2"}, LogsOptions{ServiceID: "svc_1", Follow: true, Tail: 5, Version: 2}},
		{[]string{"svc_1", "--since", "2026-11-25T07:00:00+01:00"}, LogsOptions{ServiceID: "svc_1", Since: "2026-11-25T06:00:00Z"}},
		{[]string{"svc_1", "--follow", "--timeout", "3s"}, LogsOptions{ServiceID: "svc_1", Follow: true, FollowFor: 3 * time.Second}},
		{[]string{"svc_1", "--timeout", "3s"}, LogsOptions{ServiceID: "svc_1"}},
	} {
		f, ts := newTestFactory(nil)
		var got *LogsOptions
		if code := runWith(t, f, NewCmdLogs(f, func(o *LogsOptions) error { got = o; return nil }), c.args...); code != 0 {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		got.Factory = nil
		if *got != c.want {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, _ := newTestFactory(nil)
	var got *LogsOptions
	before := time.Now()
	runWith(t, f, NewCmdLogs(f, func(o *LogsOptions) error { got = o; return nil }), "svc_1", "--since", "10m")
	if since, err := time.Parse(time.RFC3339Nano, got.Since); err != nil || since.Before(before.Add(-10*time.Minute)) || since.After(time.Now().Add(-10*time.Minute)) {
		t.Errorf("--since 10m: %q %v", got.Since, err)
	}
	for _, args := range [][]string{{}, {"svc_1", "--since", "yesterday"}, {"svc_1", "--tail", "-1"}, {"svc_1", "--tail", "9999"}, {"svc_1", "--version", "-2"}} {
		f, _ := newTestFactory(nil)
		if code := runWith(t, f, NewCmdLogs(f, func(*LogsOptions) error { return nil }), args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
}

// pier logs prints TIME STREAM TEXT, or each line's JSON with --json.
func TestLogsPrint(t *testing.T) {
	fs := newFakeServices(t, &fakeServices{lines: []string{"#starting", "listening on 127.0.0.1:5000", "!warning: slow"}})
	f, ts := fs.factory()
	if code := runWith(t, f, NewCmdLogs(f, nil), "svc_1", "--tail", "2", "--version", "1", "--since", "2026-11-25T07:00:00Z"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.err)
	}
	want := "2026-11-25T07:16:18.500Z stdout listening on 127.0.0.1:5000\n2026-11-25T07:16:19.500Z stderr warning: slow\n"
	if ts.out.String() != want {
		t.Errorf("stdout:\n%s\nwant\n%s", ts.out, want)
	}
	if q := fs.logQueries[0]; q.Encode() != "since=2026-11-25T07%3A00%3A00Z&tail=2&version=1" {
		t.Errorf("query %s", q.Encode())
	}

	f, ts = fs.factory()
	if code := runWith(t, f, NewCmdLogs(f, nil), "svc_1", "--json"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.err)
	}
	lines := strings.Split(strings.TrimSpace(ts.out.String()), "\n")
	if len(lines) != 3 || lines[0] != `{"seq":1,"at":"2026-11-25T07:16:17.5Z","stream":"system","version":1,"text":"starting"}` {
		t.Errorf("--json:\n%s", ts.out)
	}

	f, ts = fs.factory()
	if code := runWith(t, f, NewCmdLogs(f, nil), "svc_404"); code != ExitNotFound {
		t.Errorf("an unknown service: exit %d: %s", code, ts.err)
	}
}

// --follow streams NDJSON, skips keep-alives, opens the stream again from
// the last line while the service runs, and stops once it is torn down.
func TestLogsFollow(t *testing.T) {
	fs := newFakeServices(t, &fakeServices{lines: []string{"one", "two"}})
	f, ts := fs.factory()
	done := make(chan int)
	go func() { done <- runWith(t, f, NewCmdLogs(f, nil), "svc_1", "--follow", "--tail", "10") }()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, ts.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not end with the service")
	}
	if want := "2026-11-25T07:16:17.500Z stdout one\n2026-11-25T07:16:18.500Z stdout two\n"; ts.out.String() != want {
		t.Errorf("stdout:\n%s\nwant\n%s", ts.out, want)
	}
	if len(fs.logQueries) != 2 || fs.logQueries[0].Encode() != "follow=true&tail=10" || fs.logQueries[1].Encode() != "after=2&follow=true" {
		t.Errorf("follow queries: %v", fs.logQueries)
	}

	// A service already torn down has its lines printed, not followed.
	fs = newFakeServices(t, &fakeServices{lines: []string{"one", "#stopped (SIGTERM)"}, tornDown: true})
	f, ts = fs.factory()
	if code := runWith(t, f, NewCmdLogs(f, nil), "svc_1", "--follow"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.err)
	}
	if !strings.HasSuffix(ts.out.String(), "system stopped (SIGTERM)\n") || fs.follows != 0 {
		t.Errorf("a torn-down service: %d follows, stdout:\n%s", fs.follows, ts.out)
	}
}

// A follow ends with exit 0 when interrupted, or when an explicit --timeout
// runs out, while the stream stays open.
func TestLogsFollowUntilTimeout(t *testing.T) {
	var accept string
	fs := newFakeServices(t, &fakeServices{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/services/svc_1" {
			writeEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":`+fs.service("live", 1)+`,"formatVersion":"1"}`)
			return
		}
		accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"seq":1,"at":"2026-11-25T07:16:17Z","stream":"stdout","version":1,"text":"tick"}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	f, ts := newTestFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "pk_test"})
	start := time.Now()
	if code := runWith(t, f, NewCmdLogs(f, nil), "svc_1", "--follow", "--timeout", "300ms", "--json"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the follow outlived its --timeout")
	}
	if ts.out.String() != `{"seq":1,"at":"2026-11-25T07:16:17Z","stream":"stdout","version":1,"text":"tick"}`+"\n" || accept != "application/x-ndjson" {
		t.Errorf("stdout %q, Accept %q", ts.out, accept)
	}
}

func TestRollbackOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want RollbackOptions
	}{
		{[]string{"svc_1"}, RollbackOptions{ServiceID: "svc_1", Wait: true}},
		{[]string{"svc_1", "--version", "3", "--no-wait"}, RollbackOptions{ServiceID: "svc_1", Version: 3}},
	} {
		f, ts := newTestFactory(nil)
		var got *RollbackOptions
		if code := runWith(t, f, NewCmdRollback(f, func(o *RollbackOptions) error { got = o; return nil }), c.args...); code != 0 {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		got.Factory = nil
		if *got != c.want {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	for _, args := range [][]string{{}, {"svc_1", "--version", "0"}, {"svc_1", "svc_2"}} {
		f, _ := newTestFactory(nil)
		if code := runWith(t, f, NewCmdRollback(f, func(*RollbackOptions) error { return nil }), args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
}

// pier rollback waits for the task and says which version serves; --no-wait
// returns the handle; --json prints the finished task; a version that never
// becomes healthy exits 10.
func TestRollback(t *testing.T) {
	fs := newFakeServices(t, &fakeServices{})
	f, ts := fs.factory()
	if code := runWith(t, f, NewCmdRollback(f, nil), "svc_1", "--version", "1"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.err)
	}
	want := "service svc_1 serves version 1 (was 2)\nhttps://api--prj-1.localhost:8443/\ntask    tsk_3 (succeeded)\nUndo:   pier rollback svc_1 --version 2\n"
	if ts.out.String() != want {
		t.Errorf("stdout:\n%s\nwant\n%s", ts.out, want)
	}
	if got := toJSONText(fs.rollback); got != `[{"version":1}]` {
		t.Errorf("rollback bodies: %s", got)
	}

	fs = newFakeServices(t, &fakeServices{})
	f, ts = fs.factory()
	if code := runWith(t, f, NewCmdRollback(f, nil), "svc_1", "--no-wait"); code != 0 {
		t.Fatalf("--no-wait: exit %d: %s", code, ts.err)
	}
	if !strings.Contains(ts.out.String(), "task    tsk_3 (queued)\nNext: pier tasks get tsk_3\n") || fs.taskPolls["tsk_3"] != 0 {
		t.Errorf("--no-wait: %s (%d polls)", ts.out, fs.taskPolls["tsk_3"])
	}
	if got := toJSONText(fs.rollback); got != `[{}]` {
		t.Errorf("rollback bodies: %s", got)
	}

	fs = newFakeServices(t, &fakeServices{})
	f, ts = fs.factory()
	if code := runWith(t, f, NewCmdRollback(f, nil), "svc_1", "--json"); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, ts.err)
	}
	var env struct {
		Data struct {
			State  string         `json:"state"`
			Result map[string]any `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(ts.out.Bytes(), &env); err != nil || env.Data.State != "succeeded" || env.Data.Result["version"] != 1.0 {
		t.Errorf("--json: %s (%v)", ts.out, err)
	}

	fs = newFakeServices(t, &fakeServices{rollbackFails: true})
	f, ts = fs.factory()
	if code := runWith(t, f, NewCmdRollback(f, nil), "svc_1"); code != ExitServiceFailed {
		t.Fatalf("a failed rollback: exit %d, want %d: %s", code, ExitServiceFailed, ts.err)
	}
	if !strings.Contains(ts.err.String(), "service:unhealthy: version 1 of api never became healthy") {
		t.Errorf("stderr: %s", ts.err)
	}
}

// On a terminal a log line clears the spinner's line first; off one, with
// --json, progress and log lines stay off stderr.
func TestProgressLine(t *testing.T) {
	f, ts := newTestFactory(nil)
	f.IO.StderrIsTerminal = func() bool { return true }
	p := newProgress(f)
	p.step("start (running)")
	p.line("  stdout listening")
	p.step("deploy (running)")
	p.done()
	if want := "\r\033[K⠙ start (running)\r\033[K  stdout listening\n\r\033[K⠹ deploy (running)\r\033[K"; ts.err.String() != want {
		t.Errorf("terminal stderr %q, want %q", ts.err, want)
	}
	f, ts = newTestFactory(nil)
	f.Config.JSON = true
	p = newProgress(f)
	p.step("start (running)")
	p.line("  stdout listening")
	if ts.err.Len() != 0 {
		t.Errorf("--json off a terminal: stderr %q", ts.err)
	}
}

// fakeMutation is the receipt, undo and budget a task handle carries.
func fakeMutation(taskID string) string {
	return `"receipt":{"id":"rcp_` + taskID + `","action":"launch_service","costs":[],"totalUsd":0,"createdResources":[{"type":"task","id":"` + taskID +
		`"}],"createdAt":"2026-11-25T07:16:17Z"},"undo":{"command":null,"irreversible":true},"budgetRemainingUsd":100`
}
