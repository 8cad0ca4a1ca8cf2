package clitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/cli/cmdutil"
)

// FakeServices answers the calls of a process launch, pier logs and pier
// rollback with envelopes in the contract's shapes, each validated as it is
// served, and records what the CLI sent.
type FakeServices struct {
	t *testing.T

	// Existing: the project already runs "api" as svc_1 (version 1), so a
	// launch is its version 2.
	Existing bool
	// states is what polling the launch task finds, one per poll, the last
	// repeated: queued, start, deploy, succeeded or failed.
	States []string
	// launchError, when set, is the launch's error envelope (status 422).
	LaunchError string
	// rollbackFails makes the rollback task fail with service:unhealthy.
	RollbackFails bool
	// lines are the service's log lines, seq 1, 2, … in order.
	Lines []string
	// TornDown: get_service finds svc_1 torn down.
	TornDown bool
	// OnTaskPoll, when set, runs before each poll of a task is answered,
	// with the task's id and how many polls of it came before.
	OnTaskPoll func(id string, n int)
	// OnLaunch, when set, runs once the launch's body is read and before
	// it is answered.
	OnLaunch func(r *http.Request)

	Mu          sync.Mutex
	Follows     int
	LaunchBody  map[string]any
	Quotes      []map[string]any
	Rollback    []map[string]any
	LogQueries  []url.Values
	TaskPolls   map[string]int
	ServiceRead int

	Srv *httptest.Server
}

// NewFakeServices serves fs's answers on a test server, closed when the
// test ends.
func NewFakeServices(t *testing.T, fs *FakeServices) *FakeServices {
	t.Helper()
	fs.t, fs.TaskPolls = t, map[string]int{}
	mux := http.NewServeMux()
	(&FakeBlobs{}).Register(t, mux)
	mux.HandleFunc("POST /v1/bundles", fs.createBundle)
	mux.HandleFunc("POST /v1/quotes", fs.createQuote)
	mux.HandleFunc("GET /v1/services", fs.listServices)
	mux.HandleFunc("POST /v1/projects/prj_1/launch", fs.launch)
	mux.HandleFunc("GET /v1/tasks/{id}", fs.getTask)
	mux.HandleFunc("GET /v1/services/svc_1", fs.getService)
	mux.HandleFunc("GET /v1/services/svc_1/logs", fs.serviceLogs)
	mux.HandleFunc("POST /v1/services/svc_1/rollback", fs.rollbackService)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteEnvelope(w, 404, ErrorEnvelope("not_found:resource", "nothing at "+r.URL.Path, false, ""))
	})
	fs.Srv = httptest.NewServer(fs.checkedAgainstTheContract(mux))
	t.Cleanup(fs.Srv.Close)
	return fs
}

// createBundle answers upload_assets with one bundle.
func (fs *FakeServices) createBundle(w http.ResponseWriter, r *http.Request) {
	WriteEnvelope(w, 201, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"budgetRemainingUsd":100,"bundleId":"bnd_1","deduplicated":false,"fileCount":2,"newBlobs":2,"receipt":{"action":"upload_assets","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"bnd_1","type":"bundle"}],"id":"rcp_0","totalUsd":0},"sha256":"4838855e096961ec713e4d2b32cf6aa636cce04ffae0da5ee293d3c32641e1e7","totalBytes":40,"undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`)
}

// createQuote records the quote asked for and holds $7 for it.
func (fs *FakeServices) createQuote(w http.ResponseWriter, r *http.Request) {
	fs.Mu.Lock()
	fs.Quotes = append(fs.Quotes, ReadBody(fs.t, r))
	fs.Mu.Unlock()
	WriteEnvelope(w, 201, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"amountUsd":7,"budgetRemainingUsd":100,"decision":"ALLOW","gatedSteps":[],"lines":[{"amountUsd":7,"item":"service:api"}],"projectId":"prj_1","quoteId":"quo_1","reasons":[],"receipt":{"action":"create_quote","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":"quo_1","type":"quote"}],"id":"rcp_q","totalUsd":0},"state":"held","undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`)
}

// listServices answers the project's services: a failed one, and svc_1 when it exists.
func (fs *FakeServices) listServices(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("projectId") != "prj_1" {
		fs.t.Errorf("list_services without the project: %s", r.URL.RawQuery)
	}
	list := `{"id":"svc_0","projectId":"prj_1","name":"api","target":"process","state":"failed","previewUrl":"https://api-0--prj-1.localhost:8443/","taskId":"tsk_0","createdAt":"2026-11-25T07:16:17Z","updatedAt":"2026-11-25T07:16:17Z"}`
	if fs.Existing {
		list = fs.Service("live", 1) + "," + list
	}
	WriteEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"services":[`+list+`]},"formatVersion":"1"}`)
}

// launch records the launch and queues tsk_2, or answers launchError.
func (fs *FakeServices) launch(w http.ResponseWriter, r *http.Request) {
	fs.Mu.Lock()
	fs.LaunchBody = ReadBody(fs.t, r)
	fs.Mu.Unlock()
	if fs.OnLaunch != nil {
		fs.OnLaunch(r)
	}
	if fs.LaunchError != "" {
		WriteEnvelope(w, 422, fs.LaunchError)
		return
	}
	WriteEnvelope(w, 202, fs.task("tsk_2", "queued"))
}

// getTask answers each poll of a task with the next of its states; the rollback
// task tsk_3 starts, then succeeds or fails.
func (fs *FakeServices) getTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	fs.Mu.Lock()
	n := fs.TaskPolls[id]
	fs.TaskPolls[id]++
	fs.Mu.Unlock()
	if fs.OnTaskPoll != nil {
		fs.OnTaskPoll(id, n)
	}
	if id == "tsk_3" {
		state := "succeeded"
		if fs.RollbackFails {
			state = "failed"
		}
		if n == 0 {
			state = "start"
		}
		WriteEnvelope(w, 200, fs.task(id, state))
		return
	}
	states := fs.States
	if len(states) == 0 {
		states = []string{"succeeded"}
	}
	WriteEnvelope(w, 200, fs.task(id, states[min(n, len(states)-1)]))
}

// getService answers svc_1, torn down after two follows or when tornDown.
func (fs *FakeServices) getService(w http.ResponseWriter, r *http.Request) {
	fs.Mu.Lock()
	fs.ServiceRead++
	state := "live"
	if fs.Follows >= 2 || fs.TornDown {
		state = "torn_down"
	}
	fs.Mu.Unlock()
	WriteEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":`+fs.Service(state, fs.newVersion())+`,"formatVersion":"1"}`)
}

// serviceLogs answers the log lines after after, at most tail of them, as an
// envelope or, for a follow, as NDJSON.
func (fs *FakeServices) serviceLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fs.Mu.Lock()
	fs.LogQueries = append(fs.LogQueries, q)
	fs.Mu.Unlock()
	after, _ := strconv.Atoi(q.Get("after"))
	tail, _ := strconv.Atoi(q.Get("tail"))
	var lines []string
	for i, text := range fs.Lines {
		if seq := i + 1; seq > after {
			lines = append(lines, fmt.Sprintf(`{"seq":%d,"at":"2026-11-25T07:16:%02d.5Z","stream":%q,"version":%d,"text":%q}`, seq, 17+i, StreamOf(text), fs.newVersion(), strings.TrimPrefix(strings.TrimPrefix(text, "!"), "#")))
		}
	}
	if tail > 0 && after == 0 && len(lines) > tail {
		lines = lines[len(lines)-tail:]
	} else if tail > 0 && len(lines) > tail {
		lines = lines[:tail]
	}
	if q.Get("follow") == "true" && strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") {
		fs.Mu.Lock()
		fs.Follows++
		fs.Mu.Unlock()
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
	WriteEnvelope(w, 200, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"data":{"serviceId":"svc_1","lines":[%s],"nextAfter":%d},"formatVersion":"1"}`, strings.Join(lines, ","), next))
}

// rollbackService records the rollback asked for and queues tsk_3.
func (fs *FakeServices) rollbackService(w http.ResponseWriter, r *http.Request) {
	fs.Mu.Lock()
	fs.Rollback = append(fs.Rollback, ReadBody(fs.t, r))
	fs.Mu.Unlock()
	WriteEnvelope(w, 202, fs.task("tsk_3", "queued"))
}

// checkedAgainstTheContract serves mux with every answer validated: by
// the contract's validator, or line by line for a follow.
func (fs *FakeServices) checkedAgainstTheContract(mux *http.ServeMux) http.Handler {
	checked := Validated(mux, func(p []string) { fs.t.Errorf("the fake API drifted from the contract: %v", p) })
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
				CheckLogLine(fs.t, line)
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// CheckLogLine checks one NDJSON line against the contract's LogLine:
// seq, at, stream and text required, version optional, nothing else.
func CheckLogLine(t *testing.T, line string) {
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

// StreamOf reads a fake line's stream from its first character: ! for
// stderr, # for system, stdout otherwise.
func StreamOf(text string) string {
	switch {
	case strings.HasPrefix(text, "!"):
		return "stderr"
	case strings.HasPrefix(text, "#"):
		return "system"
	}
	return "stdout"
}

func (fs *FakeServices) newVersion() int {
	if fs.Existing {
		return 2
	}
	return 1
}

// Service is svc_1 as get_service answers it, in state, serving the
// version serving.
func (fs *FakeServices) Service(state string, serving int) string {
	versions := `{"number":1,"state":"starting","taskId":"tsk_2","createdAt":"2026-11-25T07:16:17Z"}`
	if fs.Existing {
		versions = `{"number":2,"state":"starting","taskId":"tsk_2","createdAt":"2026-11-25T07:16:17Z"},{"number":1,"state":"live","taskId":"tsk_1","createdAt":"2026-11-25T07:16:17Z"}`
	}
	return fmt.Sprintf(`{"id":"svc_1","projectId":"prj_1","name":"api","target":"process","state":%q,"previewUrl":"https://api--prj-1.localhost:8443/","version":%d,"versions":[%s],"health":{"state":"healthy","restarts":0},"taskId":"tsk_2","createdAt":"2026-11-25T07:16:17Z","updatedAt":"2026-11-25T07:16:17Z"}`,
		state, serving, versions)
}

// task renders the launch (tsk_2) or rollback (tsk_3) task in a state.
func (fs *FakeServices) task(id, state string) string {
	kind, version, previous := "launch", fs.newVersion(), 0
	if fs.Existing {
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
		actions, id, kind, taskState, steps["start"], steps["deploy"], fs.Srv.URL, id, FakeMutation(id), result)
}

// ReadBody is r's JSON body as a map, nil when it has none.
func ReadBody(t *testing.T, r *http.Request) map[string]any {
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

// Factory is a test factory pointed at the fake with an API key.
func (fs *FakeServices) Factory() (*cmdutil.Factory, *Streams) {
	return NewFactory(map[string]string{"PIER_BASE_URL": fs.Srv.URL, "PIER_API_KEY": "pk_test"})
}

// JSONText is v as compact JSON, for comparing what the CLI sent.
func JSONText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// FakeMutation is the receipt, undo and budget a task handle carries.
func FakeMutation(taskID string) string {
	return `"receipt":{"id":"rcp_` + taskID + `","action":"launch_service","costs":[],"totalUsd":0,"createdResources":[{"type":"task","id":"` + taskID +
		`"}],"createdAt":"2026-11-25T07:16:17Z"},"undo":{"command":null,"irreversible":true},"budgetRemainingUsd":100`
}
