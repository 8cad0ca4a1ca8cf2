package bench

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/server"
)

// launchesPerOp is how many launches one benchmark operation times; the
// percentiles are over these.
const launchesPerOp = 20

// BenchmarkLaunchLatency times, on the embedded defaults (SQLite, the local
// CA), each of 20 launches of a 50-file site under 1 MiB from the launch
// call to the first HTTPS 200 at its preview URL, fetched through the
// server's TLS listener with the chain verified against the local CA. The
// bundle is uploaded before the clock starts. It reports p50-ms, p95-ms and
// max-ms. Goal: p50 <= 1 s, p95 <= 2 s.
func BenchmarkLaunchLatency(b *testing.B) {
	dir := b.TempDir()
	key, project := adminSetup(b, dir)
	s := serveOn(b, dir)

	api := "http://" + s.Addr()
	site := siteClient(s)
	files := siteOf50Files()

	var all []time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := 0; i < launchesPerOp; i++ {
			b.StopTimer()
			name := fmt.Sprintf("s%d-%d", n, i)
			files["index.html"] = []byte("<!doctype html><title>" + name + "</title><h1>" + name + "</h1>")
			bundle := apiCall(b, key, "POST", api+"/v1/bundles", uploadRequest(project, files))["bundleId"].(string)
			b.StartTimer()

			start := time.Now()
			task := apiCall(b, key, "POST", api+"/v1/projects/"+project+"/launch",
				map[string]any{"name": name, "target": "edge", "bundleId": bundle})
			url, _ := task["previewUrl"].(string)
			if url == "" {
				url = previewURL(b, key, api, task["taskId"].(string))
			}
			for {
				resp, err := site.Get(url)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				if time.Since(start) > 30*time.Second {
					b.Fatalf("%s not served after 30 s: %v", url, err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			all = append(all, time.Since(start))
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(all, 0.95)), "p95-ms")
	b.ReportMetric(ms(percentile(all, 1)), "max-ms")
	b.ReportMetric(float64(len(all))/float64(b.N), "launches/op")
}

// previewURL is named by the task's result once the task has it; the
// launch answer does not carry it, and polling the task is what a client
// does. The probe loop, not this, decides when the site is served.
func previewURL(b *testing.B, key, api, taskID string) string {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		t := apiCall(b, key, "GET", api+"/v1/tasks/"+taskID, nil)
		if u, ok := t["previewUrl"].(string); ok && u != "" {
			return u
		}
		if t["state"] == "failed" {
			b.Fatalf("launch failed: %v", t)
		}
	}
	b.Fatalf("task %s named no preview URL", taskID)
	return ""
}

// siteOf50Files is a site of 50 files, 900 KiB in all: pages, stylesheets,
// scripts and binary assets.
func siteOf50Files() map[string][]byte {
	files := map[string][]byte{"404.html": []byte("<h1>Not here</h1>")}
	text := func(n int) []byte {
		raw := make([]byte, n*3/4)
		rand.Read(raw)
		return []byte(base64.StdEncoding.EncodeToString(raw))
	}
	for i := 0; len(files) < 49; i++ {
		switch i % 4 {
		case 0:
			files[fmt.Sprintf("pages/p%d.html", i)] = append([]byte("<!doctype html><p>"), text(8<<10)...)
		case 1:
			files[fmt.Sprintf("css/s%d.css", i)] = append([]byte("body{}/*"), append(text(12<<10), "*/"...)...)
		case 2:
			files[fmt.Sprintf("js/m%d.js", i)] = append([]byte("// "), text(24<<10)...)
		default:
			raw := make([]byte, 28<<10)
			rand.Read(raw)
			files[fmt.Sprintf("img/i%d.png", i)] = raw
		}
	}
	files["index.html"] = nil // set per launch, the 50th file
	var total int
	for _, f := range files {
		total += len(f)
	}
	if len(files) != 50 || total >= 1<<20 {
		panic(fmt.Sprintf("site of %d files, %d bytes", len(files), total))
	}
	return files
}

func uploadRequest(project string, files map[string][]byte) map[string]any {
	var list []any
	for p, c := range files {
		list = append(list, map[string]any{"path": p, "contentBase64": base64.StdEncoding.EncodeToString(c)})
	}
	return map[string]any{"projectId": project, "files": list}
}

// apiCall sends a JSON request with the key and an Idempotency-Key, and
// returns the envelope's data.
func apiCall(b testing.TB, key, method, url string, body any) map[string]any {
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == "POST" {
		req.Header.Set("Idempotency-Key", rand.Text())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		b.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, out)
	}
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(out, &env); err != nil {
		b.Fatal(err)
	}
	return env.Data
}

// adminSetup creates a key and a project the way a local operator does,
// with `pier admin create-key` and `pier admin create-project`.
func adminSetup(b testing.TB, dataDir string) (key, project string) {
	return adminSetupBudget(b, dataDir, 1000)
}

// adminSetupBudget is adminSetup with the project's budget in USD.
func adminSetupBudget(b testing.TB, dataDir string, budgetUSD int) (key, project string) {
	return adminSetupOn(b, dataDir, "", budgetUSD)
}

// adminSetupOn is adminSetupBudget on PostgreSQL when databaseURL is set.
func adminSetupOn(b testing.TB, dataDir, databaseURL string, budgetUSD int) (key, project string) {
	run := func(args ...string) map[string]any {
		var admin = findCmd(server.NewCommands(), "admin")
		var out bytes.Buffer
		admin.SetOut(&out)
		admin.SetErr(io.Discard)
		args = append(args, "--data-dir", dataDir, "--json")
		if databaseURL != "" {
			args = append(args, "--database-url", databaseURL)
		}
		admin.SetArgs(args)
		if err := admin.Execute(); err != nil {
			b.Fatalf("pier admin %s: %v", strings.Join(args, " "), err)
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			b.Fatalf("pier admin %s: %v: %s", strings.Join(args, " "), err, out.String())
		}
		return m
	}
	key = run("create-key", "--scopes", "read,quote,launch")["apiKey"].(string)
	project = run("create-project", "--name", "bench", "--budget-usd", fmt.Sprint(budgetUSD))["projectId"].(string)
	return key, project
}

func findCmd(cmds []*cobra.Command, name string) *cobra.Command {
	for _, c := range cmds {
		if c.Name() == name {
			return c
		}
	}
	panic("no command " + name)
}
