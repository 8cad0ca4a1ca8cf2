package bench

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRelaunchUnderLoad relaunches examples/app with a new greeting while
// four clients keep requesting it through the edge (the server's HTTP
// listener, by preview host), on the server's default drain. Every request
// must answer 200 with the old or the new greeting; both must be seen; and
// once the relaunch task has succeeded (the old version stopped), only the
// new one answers. About 10 s.
func TestRelaunchUnderLoad(t *testing.T) {
	dir := t.TempDir()
	key, project := adminSetup(t, dir)
	s := serveOn(t, dir)
	api := "http://" + s.Addr()
	files := appFiles(t)
	const v1, v2 = "hello v1", "hello v2"

	bundle := apiCall(t, key, "POST", api+"/v1/bundles", uploadRequest(project, files))["bundleId"].(string)
	task := apiCall(t, key, "POST", api+"/v1/projects/"+project+"/launch", map[string]any{"name": "app", "target": "process",
		"bundleId": bundle, "quoteId": quoteProcess(t, key, api, project, "app"), "env": map[string]any{"GREETING": v1}})
	first := waitTaskState(t, key, api, task["taskId"].(string), "succeeded")
	host := hostOf(first["previewUrl"].(string))

	l := &greetingLoad{v1: v1 + "\n", v2: v2 + "\n"}
	l.start(s.Addr(), host, 4)
	time.Sleep(2 * time.Second)
	started := time.Now()
	re := apiCall(t, key, "POST", api+"/v1/projects/"+project+"/launch", map[string]any{"name": "app", "target": "process",
		"bundleId": bundle, "env": map[string]any{"GREETING": v2}})
	done := waitTaskState(t, key, api, re["taskId"].(string), "succeeded")
	l.relaunched.Store(true)
	took := time.Since(started)
	time.Sleep(2 * time.Second)
	l.stop.Store(true)
	l.wg.Wait()

	t.Logf("%d requests through a relaunch (%.1f s to version %v, drain included): %d failed, %d old greeting, %d new, %d old after the old version stopped",
		l.total.Load(), took.Seconds(), done["result"].(map[string]any)["version"], l.failed.Load(), l.seen1.Load(), l.seen2.Load(), l.late1.Load())
	if l.failed.Load() > 0 {
		t.Errorf("%d of %d requests failed across the relaunch; first ones:\n%s", l.failed.Load(), l.total.Load(), strings.Join(l.failures, "\n"))
	}
	if l.seen1.Load() == 0 || l.seen2.Load() == 0 {
		t.Errorf("the load saw %d answers from the old version and %d from the new one; it should see both", l.seen1.Load(), l.seen2.Load())
	}
	if l.late1.Load() > 0 {
		t.Errorf("%d requests sent after the relaunch task succeeded were answered by the old version", l.late1.Load())
	}
}

// greetingLoad asks a host for its greeting in a loop from several
// goroutines and counts the answers: v1 before and after the relaunch
// succeeded, v2, and failures.
type greetingLoad struct {
	v1, v2     string
	stop       atomic.Bool
	relaunched atomic.Bool // the relaunch task succeeded: the old version is stopped
	wg         sync.WaitGroup
	total      atomic.Int64
	failed     atomic.Int64 // transport errors and answers other than 200
	seen1      atomic.Int64
	seen2      atomic.Int64
	late1      atomic.Int64 // the old greeting, asked after the old version stopped
	mu         sync.Mutex
	failures   []string
}

func (l *greetingLoad) fail(format string, args ...any) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.failures) < 10 {
		l.failures = append(l.failures, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

// start runs n goroutines asking addr for host until stop is set.
func (l *greetingLoad) start(addr, host string, n int) {
	for range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c := &http.Client{Timeout: 5 * time.Second}
			for !l.stop.Load() {
				after := l.relaunched.Load()
				code, body, err := edgeGet(c, addr, host)
				l.total.Add(1)
				switch {
				case err != nil:
					l.fail("transport: %v", err)
				case code != http.StatusOK:
					l.fail("%d %q", code, body)
				case body == l.v1:
					l.seen1.Add(1)
					if after {
						l.late1.Add(1)
					}
				case body == l.v2:
					l.seen2.Add(1)
				default:
					l.fail("200 with %q", body)
				}
			}
		}()
	}
}
