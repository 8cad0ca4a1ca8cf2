package bench

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// BenchmarkThroughNginx is requests per second through Debian's nginx in
// front of 1 and of 3 replicas on one PostgreSQL, for a 1 KiB edge page
// and for the API's search. Read req/s, and take 3 replicas over 1. On a
// 2-core machine the replicas, nginx and the load generator share the same
// two cores: the ratio measures overhead, not scaling.
func BenchmarkThroughNginx(b *testing.B) {
	for _, n := range []int{1, 3} {
		db := testpg.NewDatabase(b)
		limits := map[string]server.RateLimit{"search": {PerSecond: 1e9, Burst: 1 << 30}}
		var replicas []*testserver.Server
		for range n {
			replicas = append(replicas, testserver.Start(b, server.Config{DatabaseURL: db, RateLimits: limits}))
		}
		lb := testserver.Nginx(b, replicas...)
		host := launchSite(b, replicas[0])
		b.Run(fmt.Sprintf("edge/replicas=%d", n), func(b *testing.B) {
			hammer(b, "http://"+lb+"/", host)
		})
		b.Run(fmt.Sprintf("search/replicas=%d", n), func(b *testing.B) {
			hammer(b, "http://"+lb+"/v1/domains/search?q=scale", "")
		})
	}
}

func hammer(b *testing.B, url, host string) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", url, nil)
			if host != "" {
				req.Host = host
			}
			res, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// launchSite launches a 1 KiB page and answers its host.
func launchSite(b *testing.B, ts *testserver.Server) string {
	key := ts.Key(b, "read", "quote", "launch")
	call := func(method, path string, body string) map[string]any {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		var env map[string]any
		json.NewDecoder(res.Body).Decode(&env)
		if res.StatusCode >= 300 {
			b.Fatalf("%s %s: %d %v", method, path, res.StatusCode, env)
		}
		return env["data"].(map[string]any)
	}
	proj := call("GET", "/v1/projects", "")["projects"].([]any)[0].(map[string]any)["id"].(string)
	page := strings.Repeat("x", 1024)
	bundle := call("POST", "/v1/bundles", fmt.Sprintf(`{"projectId":%q,"files":[{"path":"index.html","contentBase64":%q}]}`, proj, b64(page)))["bundleId"].(string)
	task := call("POST", "/v1/projects/"+proj+"/launch", fmt.Sprintf(`{"name":"scale","target":"edge","bundleId":%q}`, bundle))["taskId"].(string)
	for range 500 {
		if call("GET", "/v1/tasks/"+task, "")["state"] == "succeeded" {
			return ts.Service().PreviewHost("scale", proj)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatal("the launch did not finish")
	return ""
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
