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

	var (
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
	)
	fail := func(format string, args ...any) {
		failed.Add(1)
		mu.Lock()
		if len(failures) < 10 {
			failures = append(failures, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 5 * time.Second}
			for !stop.Load() {
				after := relaunched.Load()
				code, body, err := edgeGet(c, s.Addr(), host)
				total.Add(1)
				switch {
				case err != nil:
					fail("transport: %v", err)
				case code != http.StatusOK:
					fail("%d %q", code, body)
				case body == v1+"\n":
					seen1.Add(1)
					if after {
						late1.Add(1)
					}
				case body == v2+"\n":
					seen2.Add(1)
				default:
					fail("200 with %q", body)
				}
			}
		}()
	}

	time.Sleep(2 * time.Second)
	started := time.Now()
	re := apiCall(t, key, "POST", api+"/v1/projects/"+project+"/launch", map[string]any{"name": "app", "target": "process",
		"bundleId": bundle, "env": map[string]any{"GREETING": v2}})
	done := waitTaskState(t, key, api, re["taskId"].(string), "succeeded")
	relaunched.Store(true)
	took := time.Since(started)
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()

	t.Logf("%d requests through a relaunch (%.1f s to version %v, drain included): %d failed, %d old greeting, %d new, %d old after the old version stopped",
		total.Load(), took.Seconds(), done["result"].(map[string]any)["version"], failed.Load(), seen1.Load(), seen2.Load(), late1.Load())
	if failed.Load() > 0 {
		t.Errorf("%d of %d requests failed across the relaunch; first ones:\n%s", failed.Load(), total.Load(), strings.Join(failures, "\n"))
	}
	if seen1.Load() == 0 || seen2.Load() == 0 {
		t.Errorf("the load saw %d answers from the old version and %d from the new one; it should see both", seen1.Load(), seen2.Load())
	}
	if late1.Load() > 0 {
		t.Errorf("%d requests sent after the relaunch task succeeded were answered by the old version", late1.Load())
	}
}
