package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// pierBinDir holds the binary pierBinary built, removed when the tests end.
var pierBinDir string

// pierBinary builds cmd/pier-server, the CLI with the server's commands,
// once for the tests that need a real process.
var pierBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "pier-bin-")
	if err != nil {
		return "", err
	}
	pierBinDir = dir
	bin := filepath.Join(dir, "pier-server")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/pierhq/pier/cmd/pier-server").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// process is `pier server` running as a child, with its log captured.
type process struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	log  bytes.Buffer
	seen chan string
}

var servingRE = regexp.MustCompile(`Pier is serving at (http://\S+)`)

func startProcess(t *testing.T, bin, dataDir string, env ...string) *process {
	t.Helper()
	return startProcessArgs(t, bin, dataDir, nil, env...)
}

// startProcessArgs is startProcess with more flags for pier server.
func startProcessArgs(t *testing.T, bin, dataDir string, args []string, env ...string) *process {
	t.Helper()
	return startCommand(t, exec.Command(bin, serverArgs(dataDir, args)...), env...)
}

// serverArgs are the arguments of `pier server` on dataDir with loopback
// listeners on free ports, followed by args (a flag given again there
// wins).
func serverArgs(dataDir string, args []string) []string {
	return append([]string{"server", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0",
		"--https-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0", "--smtp-addr", "127.0.0.1:0", "--log-level", "warn"}, args...)
}

// startCommand starts cmd, a `pier server` (perhaps behind a command that
// runs it elsewhere, such as nsenter), and waits until it serves.
func startCommand(t *testing.T, cmd *exec.Cmd, env ...string) *process {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, seen: make(chan string, 64)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			select {
			case p.seen <- line:
			default:
			}
		}
	}()
	p.url = p.waitFor(t, servingRE, 30*time.Second)[1]
	return p
}

// crashKey makes a local key in dataDir, as the operator would.
func crashKey(t *testing.T, bin, dataDir string) http.Header {
	t.Helper()
	out, err := exec.Command(bin, "admin", "create-key", "--data-dir", dataDir, "--scopes", "read,quote,launch,buy_domain", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var key struct{ APIKey string }
	json.Unmarshal(out, &key)
	return http.Header{"Authorization": {"Bearer " + key.APIKey}}
}

// finished polls a task until it ends or d passes, and returns it.
func finished(c *contracttest.Client, h http.Header, taskID string, d time.Duration) map[string]any {
	deadline := time.Now().Add(d)
	var task map[string]any
	for time.Now().Before(deadline) {
		task = c.Do("GET", "/v1/tasks/"+taskID, nil, h).JSON()["data"].(map[string]any)
		if task["state"] == "succeeded" || task["state"] == "failed" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return task
}

// waitFor returns the first log line matching re.
func (p *process) waitFor(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case line := <-p.seen:
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-timeout:
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("no log line matching %s; log:\n%s", re, p.log.String())
		}
	}
}

func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
}

// A launch that registers a domain is killed with SIGKILL at each step
// boundary and restarted; every time, the task completes exactly once: the
// registrar sold the domain once and the budget was charged once.
func TestLaunchSurvivesSIGKILLAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server as a separate process")
	}
	bin, err := pierBinary()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, env, wait string }{
		{service.StepCharge, "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepCharge, `paused at step boundary.*step=` + service.StepCharge},
		{service.StepRegister, "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepRegister, `paused at step boundary.*step=` + service.StepRegister},
		{service.StepDNS, "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepDNS, `paused at step boundary.*step=` + service.StepDNS},
		{service.StepDeploy, "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepDeploy, `paused at step boundary.*step=` + service.StepDeploy},
		{service.StepTLS, "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepTLS, `paused at step boundary.*step=` + service.StepTLS},
		// Killed after the registrar sold the domain but before the step was
		// saved: the retry must find the sale by its reference, not buy again.
		{"inside_" + service.StepRegister, "PIER_TEST_PAUSE_INSIDE_STEP=" + service.StepRegister, `paused inside step.*step=` + service.StepRegister},
	}
	domains := availableDomains(len(cases), "dev", "crash")
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			h := crashKey(t, bin, dataDir)
			p := startProcess(t, bin, dataDir, tc.env)
			c := &contracttest.Client{T: t, BaseURL: p.url}
			project := c.Do("GET", "/v1/projects", nil, h).JSON()["data"].(map[string]any)["projects"].([]any)[0].(map[string]any)["id"].(string)
			bundle := c.Do("POST", "/v1/bundles", uploadBody(project, siteFiles), h).JSON()["data"].(map[string]any)["bundleId"]
			quote := c.Do("POST", "/v1/quotes", domainQuote(project, domains[i], 1), h).JSON()["data"].(map[string]any)
			launch := c.Do("POST", "/v1/projects/"+project+"/launch", map[string]any{
				"name": "site", "target": "edge", "bundleId": bundle, "domain": domains[i], "quoteId": quote["quoteId"],
			}, h)
			if launch.StatusCode != 202 {
				t.Fatalf("launch: %d %s", launch.StatusCode, launch.Body)
			}
			taskID := launch.JSON()["data"].(map[string]any)["taskId"].(string)

			p.waitFor(t, regexp.MustCompile(tc.wait), 30*time.Second)
			p.kill(t)

			p2 := startProcess(t, bin, dataDir)
			c2 := &contracttest.Client{T: t, BaseURL: p2.url}
			task := finished(c2, h, taskID, 30*time.Second)
			if task["state"] != "succeeded" {
				t.Fatalf("after restart the task is %v: %v", task["state"], task)
			}
			chargedOnce(t, c2, h, project, quote)
			p2.kill(t)

			st, err := store.Open(context.Background(), dataDir, "")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if n, _ := st.Domains().CountPurchases(context.Background(), domains[i]); n != 1 {
				t.Fatalf("the registrar sold %s %d times", domains[i], n)
			}
		})
	}
}

// A launch whose name is sold elsewhere while it runs fails for good, and
// the failure survives SIGKILL at its edges: killed before the failure is
// recorded, or right after, the task ends failed with exactly one charge,
// one refund, no purchase of ours, and the hold released.
func TestLaunchFailureSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server as a separate process")
	}
	bin, err := pierBinary()
	if err != nil {
		t.Fatal(err)
	}
	domains := availableDomains(2, "dev", "crashfail")
	for i, killAfterFailure := range []bool{false, true} {
		name := map[bool]string{false: "before_failure", true: "after_failure"}[killAfterFailure]
		t.Run(name, func(t *testing.T) {
			dataDir := t.TempDir()
			out, err := exec.Command(bin, "admin", "create-key", "--data-dir", dataDir, "--scopes", "read,quote,launch,buy_domain", "--json").Output()
			if err != nil {
				t.Fatal(err)
			}
			var key struct{ APIKey string }
			json.Unmarshal(out, &key)
			h := http.Header{"Authorization": {"Bearer " + key.APIKey}}

			p := startProcess(t, bin, dataDir, "PIER_TEST_PAUSE_AFTER_STEP="+service.StepCharge)
			c := &contracttest.Client{T: t, BaseURL: p.url}
			project := c.Do("GET", "/v1/projects", nil, h).JSON()["data"].(map[string]any)["projects"].([]any)[0].(map[string]any)["id"].(string)
			bundle := c.Do("POST", "/v1/bundles", uploadBody(project, siteFiles), h).JSON()["data"].(map[string]any)["bundleId"]
			quote := c.Do("POST", "/v1/quotes", domainQuote(project, domains[i], 1), h).JSON()["data"].(map[string]any)
			launch := c.Do("POST", "/v1/projects/"+project+"/launch", map[string]any{
				"name": "site", "target": "edge", "bundleId": bundle, "domain": domains[i], "quoteId": quote["quoteId"],
			}, h)
			if launch.StatusCode != 202 {
				t.Fatalf("launch: %d %s", launch.StatusCode, launch.Body)
			}
			taskID := launch.JSON()["data"].(map[string]any)["taskId"].(string)
			p.waitFor(t, regexp.MustCompile(`paused at step boundary.*step=`+service.StepCharge), 30*time.Second)
			soldElsewhere(t, dataDir, domains[i])
			p.kill(t)

			if killAfterFailure {
				p2 := startProcess(t, bin, dataDir, "PIER_TEST_PAUSE_AFTER_STEP=failed")
				p2.waitFor(t, regexp.MustCompile(`paused at step boundary.*step=failed`), 30*time.Second)
				p2.kill(t)
			}
			p3 := startProcess(t, bin, dataDir)
			c3 := &contracttest.Client{T: t, BaseURL: p3.url}
			task := finished(c3, h, taskID, 30*time.Second)
			if task["state"] != "failed" || task["result"].(map[string]any)["blockedBy"] != "plan:domain_unavailable" {
				t.Fatalf("after restart the task is %v: %v", task["state"], task)
			}
			chargedNothingAndRefunded(t, c3, h, project)
			p3.kill(t)
			st, err := store.Open(context.Background(), dataDir, "")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if pu, err := st.Domains().PurchaseByDomain(context.Background(), domains[i]); err != nil || pu.Ref != "elsewhere" {
				t.Fatalf("purchase %v %v", pu, err)
			}
		})
	}
}

// chargedNothingAndRefunded wants the project charged and holding nothing,
// and the ledger to show the charge, its refund and the failure once each.
func chargedNothingAndRefunded(t *testing.T, c *contracttest.Client, h http.Header, project string) {
	t.Helper()
	proj := c.Do("GET", "/v1/projects/"+project, nil, h).JSON()["data"].(map[string]any)
	if proj["spentUsd"] != 0.0 || proj["heldUsd"] != 0.0 {
		t.Fatalf("charged %v (held %v) after a failed launch", proj["spentUsd"], proj["heldUsd"])
	}
	page := c.Do("GET", "/v1/ledger?limit=1000", nil, h).JSON()["data"].(map[string]any)
	counts := map[string]int{}
	for _, e := range page["entries"].([]any) {
		counts[e.(map[string]any)["action"].(string)]++
	}
	if counts["consume_quote"] != 1 || counts["refund"] != 1 || counts["launch_failed"] != 1 {
		t.Fatalf("ledger %v", counts)
	}
}

// soldElsewhere records that the registrar sold domain to someone else.
func soldElsewhere(t *testing.T, dataDir, domain string) {
	t.Helper()
	st, err := store.Open(context.Background(), dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Domains().RecordPurchase(context.Background(), store.Purchase{Ref: "elsewhere", Domain: domain, OrgID: "org_elsewhere", Years: 1, AuthCode: "x", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// A workflow (a quote, a launch that registers a domain with it, and a
// second launch) is killed with SIGKILL at each step boundary, and inside
// steps after their operation ran but before the step was saved; after a
// restart every step ran once: one quote, one purchase, one charge.
func TestWorkflowSurvivesSIGKILLAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server as a separate process")
	}
	bin, err := pierBinary()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, env, wait string }{
		{"q", "PIER_TEST_PAUSE_AFTER_STEP=q", `paused at step boundary.*step=q`},
		{"site", "PIER_TEST_PAUSE_AFTER_STEP=site", `paused at step boundary.*step=site`},
		{"plain", "PIER_TEST_PAUSE_AFTER_STEP=plain", `paused at step boundary.*step=plain`},
		{"inside_q", "PIER_TEST_PAUSE_INSIDE_STEP=q", `paused inside step.*step=q`},
		{"inside_site", "PIER_TEST_PAUSE_INSIDE_STEP=site", `paused inside step.*step=site`},
	}
	domains := availableDomains(len(cases), "dev", "wfcrash")
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			h := crashKey(t, bin, dataDir)
			p := startProcess(t, bin, dataDir, tc.env)
			c := &contracttest.Client{T: t, BaseURL: p.url}
			project := c.Do("GET", "/v1/projects", nil, h).JSON()["data"].(map[string]any)["projects"].([]any)[0].(map[string]any)["id"].(string)
			bundle := c.Do("POST", "/v1/bundles", uploadBody(project, siteFiles), h).JSON()["data"].(map[string]any)["bundleId"]
			body := siteWorkflow(project, bundle, domains[i])
			body["steps"] = append(body["steps"].([]any), map[string]any{"id": "plain", "tool": "launch_service",
				"arguments": map[string]any{"id": project, "name": "plain", "target": "edge", "bundleId": bundle}, "after": []any{"site"}})
			wf := c.Do("POST", "/v1/workflows", body, h)
			if wf.StatusCode != 201 {
				t.Fatalf("prepare: %d %s", wf.StatusCode, wf.Body)
			}
			apply := c.Do("POST", "/v1/workflows/"+wf.JSON()["data"].(map[string]any)["workflowId"].(string)+"/apply", nil, h)
			if apply.StatusCode != 202 {
				t.Fatalf("apply: %d %s", apply.StatusCode, apply.Body)
			}
			taskID := apply.JSON()["data"].(map[string]any)["taskId"].(string)

			p.waitFor(t, regexp.MustCompile(tc.wait), 30*time.Second)
			p.kill(t)

			p2 := startProcess(t, bin, dataDir)
			c2 := &contracttest.Client{T: t, BaseURL: p2.url}
			task := finished(c2, h, taskID, 60*time.Second)
			if task["state"] != "succeeded" {
				all := c2.Do("GET", "/v1/tasks", nil, h).Body
				p2.mu.Lock()
				log := p2.log.String()
				p2.mu.Unlock()
				p2.kill(t)
				hosts := storeDump(dataDir)
				t.Fatalf("after restart the workflow is %v: %v\nall tasks: %s\nlog:\n%s\ndb: %v", task["state"], task, all, log, hosts)
			}
			proj := c2.Do("GET", "/v1/projects/"+project, nil, h).JSON()["data"].(map[string]any)
			if proj["spentUsd"] != 12.0 || proj["heldUsd"] != 0.0 {
				t.Fatalf("charged %v (held %v), want 12 once", proj["spentUsd"], proj["heldUsd"])
			}
			quotes := c2.Do("GET", "/v1/quotes", nil, h).JSON()["data"].(map[string]any)["quotes"].([]any)
			services := c2.Do("GET", "/v1/services", nil, h).JSON()["data"].(map[string]any)["services"].([]any)
			if len(quotes) != 1 || len(services) != 2 {
				t.Fatalf("%d quotes and %d services, want 1 and 2", len(quotes), len(services))
			}
			p2.kill(t)

			st, err := store.Open(context.Background(), dataDir, "")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if n, _ := st.Domains().CountPurchases(context.Background(), domains[i]); n != 1 {
				t.Fatalf("the registrar sold %s %d times", domains[i], n)
			}
		})
	}
}

// storeDump describes the hosts, services and idempotency records in the
// store under dataDir, for a failure's message.
func storeDump(dataDir string) []string {
	st, _ := store.Open(context.Background(), dataDir, "")
	rows, _ := st.DB().Query(`SELECT host, service_id FROM service_hosts`)
	var hosts []string
	for rows.Next() {
		var h, sv string
		rows.Scan(&h, &sv)
		hosts = append(hosts, h+"="+sv)
	}
	rows.Close()
	srows, _ := st.DB().Query(`SELECT id, name, state, task_id FROM services`)
	for srows.Next() {
		var a, b, c, d string
		srows.Scan(&a, &b, &c, &d)
		hosts = append(hosts, "svc "+a+" "+b+" "+c+" "+d)
	}
	srows.Close()
	irows, _ := st.DB().Query(`SELECT idem_key, operation, state, COALESCE(status, 0) FROM idempotency_records`)
	for irows.Next() {
		var a, b, c string
		var d int
		irows.Scan(&a, &b, &c, &d)
		hosts = append(hosts, fmt.Sprintf("idem %s %s %s %d", a, b, c, d))
	}
	irows.Close()
	return hosts
}

// A replica is killed with SIGKILL in the middle of a launch that buys a
// domain; another replica, running on the same PostgreSQL all along, takes
// the task over once the dead one's lease runs out and finishes it within
// 30 s of the kill: one purchase, one charge. The job timeout is the
// default 2 minutes, so the hand-over is the lease's, not River's rescue.
func TestLaunchSurvivesItsReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server as separate processes")
	}
	db := testpg.NewDatabase(t)
	bin, err := pierBinary()
	if err != nil {
		t.Fatal(err)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	out, err := exec.Command(bin, "admin", "create-key", "--data-dir", dirA, "--database-url", db, "--scopes", "read,quote,launch,buy_domain", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var key struct{ APIKey string }
	json.Unmarshal(out, &key)
	h := http.Header{"Authorization": {"Bearer " + key.APIKey}}
	flags := []string{"--database-url", db}

	a := startProcessArgs(t, bin, dirA, flags, "PIER_TEST_PAUSE_AFTER_STEP="+service.StepRegister)
	c := &contracttest.Client{T: t, BaseURL: a.url}
	project := c.Do("GET", "/v1/projects", nil, h).JSON()["data"].(map[string]any)["projects"].([]any)[0].(map[string]any)["id"].(string)
	domain := availableDomains(1, "dev", "replicakill")[0]
	bundle := c.Do("POST", "/v1/bundles", uploadBody(project, siteFiles), h).JSON()["data"].(map[string]any)["bundleId"]
	quote := c.Do("POST", "/v1/quotes", domainQuote(project, domain, 1), h).JSON()["data"].(map[string]any)
	launch := c.Do("POST", "/v1/projects/"+project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": quote["quoteId"]}, h)
	taskID := launch.JSON()["data"].(map[string]any)["taskId"].(string)
	a.waitFor(t, regexp.MustCompile(`paused at step boundary.*step=`+service.StepRegister), 30*time.Second)

	// The other replica is up before the first dies, as replicas are: it
	// must notice on its own that the task's runner is gone.
	b := startProcessArgs(t, bin, dirB, flags)
	cb := &contracttest.Client{T: t, BaseURL: b.url}
	a.kill(t)
	killed := time.Now()
	task := finished(cb, h, taskID, 30*time.Second)
	if task["state"] != "succeeded" {
		t.Fatalf("the task on the other replica is %v: %v", task["state"], task)
	}
	t.Logf("the other replica finished the task %s after the kill", time.Since(killed).Round(time.Millisecond))
	proj := cb.Do("GET", "/v1/projects/"+project, nil, h).JSON()["data"].(map[string]any)
	if proj["spentUsd"] != quote["amountUsd"] || proj["heldUsd"] != 0.0 {
		t.Fatalf("charged %v (held %v), quoted %v", proj["spentUsd"], proj["heldUsd"], quote["amountUsd"])
	}
	st, err := store.Open(context.Background(), "", db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, _ := st.Domains().CountPurchases(context.Background(), domain); n != 1 {
		t.Fatalf("the registrar sold %s %d times", domain, n)
	}
}

// A process launch is killed with SIGKILL after each of its new steps, and
// inside start (the process runs but the step is not saved); after the
// restart the task completes once, the service answers through the edge,
// the quote was charged once, and one process runs: the killed server's
// process died with it.
func TestProcessLaunchSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server as a separate process")
	}
	bin, err := pierBinary()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, env, wait string }{
		{service.StepCharge, "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepCharge, `paused at step boundary.*step=` + service.StepCharge},
		{service.StepStart, "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepStart, `paused at step boundary.*step=` + service.StepStart},
		{"inside_" + service.StepStart, "PIER_TEST_PAUSE_INSIDE_STEP=" + service.StepStart, `paused inside step.*step=` + service.StepStart},
		{service.StepDeploy, "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepDeploy, `paused at step boundary.*step=` + service.StepDeploy},
	}
	app := exampleFiles(t, "app")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			// Not t.TempDir: its parent is 0700, and a version runs as a user
			// of its own that must reach its directory.
			appsDir, err := os.MkdirTemp("", "pier-apps-crash-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(appsDir) })
			args := []string{"--apps-dir", appsDir, "--stop-grace", "2s"}
			h := crashKey(t, bin, dataDir)
			p := startProcessArgs(t, bin, dataDir, args, tc.env)
			c := &contracttest.Client{T: t, BaseURL: p.url}
			project := c.Do("GET", "/v1/projects", nil, h).JSON()["data"].(map[string]any)["projects"].([]any)[0].(map[string]any)["id"].(string)
			bundle := c.Do("POST", "/v1/bundles", uploadBody(project, app), h).JSON()["data"].(map[string]any)["bundleId"]
			quote := c.Do("POST", "/v1/quotes", map[string]any{"projectId": project, "items": []any{
				map[string]any{"kind": "service", "workload": "dynamic_service", "target": "process", "name": "api", "months": 1}}}, h).JSON()["data"].(map[string]any)
			launch := c.Do("POST", "/v1/projects/"+project+"/launch", map[string]any{"name": "api", "target": "process", "bundleId": bundle, "quoteId": quote["quoteId"]}, h)
			if launch.StatusCode != 202 {
				t.Fatalf("launch: %d %s", launch.StatusCode, launch.Body)
			}
			taskID := launch.JSON()["data"].(map[string]any)["taskId"].(string)
			p.waitFor(t, regexp.MustCompile(tc.wait), 30*time.Second)
			p.kill(t)

			p2 := startProcessArgs(t, bin, dataDir, args)
			c2 := &contracttest.Client{T: t, BaseURL: p2.url}
			task := finished(c2, h, taskID, 30*time.Second)
			if task["state"] != "succeeded" {
				t.Fatalf("after restart the task is %v: %v", task["state"], task)
			}
			host := previewHost(task)
			req, _ := http.NewRequest("GET", p2.url+"/", nil)
			req.Host = host
			var body string
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if resp, err := http.DefaultClient.Do(req); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if body = string(b); resp.StatusCode == 200 {
						break
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			if body != "Hello from a Pier process\n" {
				t.Fatalf("the service does not answer after the restart: %q", body)
			}
			chargedOnce(t, c2, h, project, quote)
			if n := processesIn(appsDir); n != 1 {
				t.Fatalf("%d processes run in the service's directories, want 1", n)
			}
			p2.kill(t)
			time.Sleep(200 * time.Millisecond)
			if n := processesIn(appsDir); n != 0 {
				t.Fatalf("%d processes outlived a SIGKILLed server", n)
			}
		})
	}
}

// chargedOnce checks that the project spent exactly the quote, holds
// nothing, and that the ledger records one charge.
func chargedOnce(t *testing.T, c *contracttest.Client, h http.Header, project string, quote map[string]any) {
	t.Helper()
	proj := c.Do("GET", "/v1/projects/"+project, nil, h).JSON()["data"].(map[string]any)
	if proj["spentUsd"] != quote["amountUsd"] || proj["heldUsd"] != 0.0 {
		t.Fatalf("charged %v (held %v), quoted %v", proj["spentUsd"], proj["heldUsd"], quote["amountUsd"])
	}
	page := c.Do("GET", "/v1/ledger?limit=1000", nil, h).JSON()["data"].(map[string]any)
	consumes := 0
	for _, e := range page["entries"].([]any) {
		if e.(map[string]any)["action"] == "consume_quote" {
			consumes++
		}
	}
	if consumes != 1 {
		t.Fatalf("%d charges in the ledger", consumes)
	}
}

// processesIn counts the processes whose working directory is under dir.
func processesIn(dir string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && strings.HasPrefix(cwd, dir+"/") {
			n++
		}
	}
	return n
}
