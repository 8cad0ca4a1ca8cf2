package bench

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkEdgeServeHTTP times the server's handler answering a GET for a
// launched site's 1 KiB file by its preview host, in-process (no network):
// routing, the edge's lookup and the response headers. It is the part of
// bench/edge.sh that is Pier's own code; profile it with
// `go test -run '^$' -bench EdgeServeHTTP -cpuprofile cpu.out ./bench/`.
func BenchmarkEdgeServeHTTP(b *testing.B) {
	dir := b.TempDir()
	key, project := adminSetup(b, dir)
	s := serveOn(b, dir)

	api := "http://" + s.Addr()
	files := map[string][]byte{"index.html": []byte("<h1>edge</h1>"), "1k.txt": []byte(strings.Repeat("abcdefgh", 128))}
	bundle := apiCall(b, key, "POST", api+"/v1/bundles", uploadRequest(project, files))["bundleId"].(string)
	task := apiCall(b, key, "POST", api+"/v1/projects/"+project+"/launch", map[string]any{"name": "edge", "target": "edge", "bundleId": bundle})
	url := previewURL(b, key, api, task["taskId"].(string))
	host := strings.TrimPrefix(url, "https://")
	host = host[:strings.IndexByte(host, '/')]

	h := s.Handler()
	req := httptest.NewRequest("GET", "http://"+host+"/1k.txt", nil)
	req.Header.Set("User-Agent", "wrk")
	w := &discardWriter{h: http.Header{}}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		clear(w.h)
		w.status, w.n = 0, 0
		h.ServeHTTP(w, req)
		if w.status == http.StatusOK && w.n == 1024 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("GET %s/1k.txt: %d, %d bytes", host, w.status, w.n)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clear(w.h)
		w.status, w.n = 0, 0
		h.ServeHTTP(w, req)
	}
}

// discardWriter is a ResponseWriter that keeps nothing but the status and
// the byte count, so the benchmark times the handler and not a recorder.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(b)
	return len(b), nil
}
