package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// appGreeting is what examples/app answers at / without GREETING.
const appGreeting = "Hello from a Pier process\n"

// BenchmarkProcessLaunch times launches of examples/app (Python's standard
// library behind a Procfile) on the embedded defaults, each under a new
// service name, from the launch call to the first 200 with the app's
// greeting proxied by the server's HTTP listener for the preview host. The
// bundle upload and the quote happen before the clock starts, the teardown
// after it stops. It reports p50-ms, p95-ms and max-ms over the
// benchmark's iterations, one launch each: run it with -benchtime 20x or
// more for percentiles worth reading.
func BenchmarkProcessLaunch(b *testing.B) {
	dir := b.TempDir()
	key, project := adminSetupBudget(b, dir, 100_000)
	s := serveOn(b, dir)
	api := "http://" + s.Addr()
	files := appFiles(b)
	probe := &http.Client{Timeout: 5 * time.Second}

	var all []time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		name := fmt.Sprintf("app%d", n)
		bundle := apiCall(b, key, "POST", api+"/v1/bundles", uploadRequest(project, files))["bundleId"].(string)
		quote := quoteProcess(b, key, api, project, name)
		b.StartTimer()

		start := time.Now()
		task := apiCall(b, key, "POST", api+"/v1/projects/"+project+"/launch",
			map[string]any{"name": name, "target": "process", "bundleId": bundle, "quoteId": quote})
		url, _ := task["previewUrl"].(string)
		if url == "" {
			url = previewURL(b, key, api, task["taskId"].(string))
		}
		host := hostOf(url)
		for {
			code, body, err := edgeGet(probe, s.Addr(), host)
			if err == nil && code == http.StatusOK {
				if body != appGreeting {
					b.Fatalf("%s answered %q", host, body)
				}
				break
			}
			if time.Since(start) > 60*time.Second {
				b.Fatalf("%s not proxied after 60 s: %d %v", host, code, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		all = append(all, time.Since(start))

		b.StopTimer()
		done := waitTaskState(b, key, api, task["taskId"].(string), "succeeded")
		down := apiCall(b, key, "POST", api+"/v1/services/"+done["serviceId"].(string)+"/teardown", nil)
		waitTaskState(b, key, api, down["taskId"].(string), "succeeded")
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(all, 0.95)), "p95-ms")
	b.ReportMetric(ms(percentile(all, 1)), "max-ms")
}

// appFiles reads examples/app as a bundle's files.
func appFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	dir := filepath.Join("..", "examples", "app")
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		files[e.Name()] = b
	}
	if files["Procfile"] == nil {
		tb.Fatalf("%s has no Procfile", dir)
	}
	return files
}

// quoteProcess quotes a month of a process service; a first launch of a
// process needs one.
func quoteProcess(tb testing.TB, key, api, project, name string) string {
	q := apiCall(tb, key, "POST", api+"/v1/quotes", map[string]any{"projectId": project, "items": []any{
		map[string]any{"kind": "service", "workload": "dynamic_service", "target": "process", "name": name, "months": 1}}})
	return q["quoteId"].(string)
}

// waitTaskState polls a task until it reaches want, and fails on any other
// end.
func waitTaskState(tb testing.TB, key, api, id, want string) map[string]any {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		t := apiCall(tb, key, "GET", api+"/v1/tasks/"+id, nil)
		switch t["state"] {
		case want:
			return t
		case "failed", "succeeded", "canceled":
			tb.Fatalf("task %s ended %s, not %s: %v", id, t["state"], want, t)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("task %s not %s after 30 s: %v", id, want, t)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hostOf is the host name of a preview URL.
func hostOf(url string) string {
	h := strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://")
	if i := strings.IndexAny(h, ":/"); i >= 0 {
		h = h[:i]
	}
	return h
}

// edgeGet asks the server's HTTP listener at addr for / on host.
func edgeGet(c *http.Client, addr, host string) (int, string, error) {
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body), err
}
