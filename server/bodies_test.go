package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// countingReader counts what the server consumed of a body.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// zeros is an endless body of zero bytes, up to n.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.left)
	clear(p[:n])
	z.left -= n
	return int(n), nil
}

// TestUnauthenticatedUploadRefusedBeforeRead sends 64 MiB to /v1/bundles
// without a key: the 401 comes back having read almost none of it.
func TestUnauthenticatedUploadRefusedBeforeRead(t *testing.T) {
	ts := start(t, server.Config{})
	const size = 64 << 20
	body := &countingReader{r: &zeros{left: size}}
	req, _ := http.NewRequest("POST", "http://"+ts.Addr()+"/v1/bundles", body)
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !bytes.Contains(b, []byte("auth:missing_credentials")) {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	// Whatever the client managed to push into socket buffers, the server
	// read a few MiB at most and closed the connection.
	if n := body.n.Load(); n > 8<<20 {
		t.Fatalf("the client sent %d MiB before the answer", n>>20)
	}
}

// TestBodyLimitsPerRoute: an announced length over the route's limit is
// refused with 413 before reading; a chunked body is cut at the limit; a
// JSON route's limit is small and the bundle route's large.
func TestBodyLimitsPerRoute(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.ProjectPolicy{}, "launch", "read", "quote")
	post := func(path string, body io.Reader, length int64, chunked bool) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+ts.Addr()+path, body)
		req.Header = a.header()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprint(time.Now().UnixNano()))
		if chunked {
			req.ContentLength = -1
			req.TransferEncoding = []string{"chunked"}
		} else {
			req.ContentLength = length
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	// Announced too large: refused without reading.
	big := &countingReader{r: &zeros{left: 100 << 20}}
	code, env := post("/v1/bundles", big, 100<<20, false)
	if code != 413 || env["blockedBy"] != "input:body_too_large" {
		t.Fatalf("bundles with Content-Length 100 MiB: %d %v", code, env)
	}
	if n := big.n.Load(); n > 8<<20 {
		t.Fatalf("read %d MiB of an announced-too-large body", n>>20)
	}
	// A 2 MiB JSON body to a JSON route, announced and chunked.
	for _, chunked := range []bool{false, true} {
		pad := `{"projectId":"` + a.project + `","items":[],"pad":"` + strings.Repeat("x", 2<<20) + `"}`
		code, env := post("/v1/quotes", strings.NewReader(pad), int64(len(pad)), chunked)
		if code != 413 || env["blockedBy"] != "input:body_too_large" {
			t.Fatalf("2 MiB to /v1/quotes (chunked=%v): %d %v", chunked, code, env)
		}
	}
	// The same 2 MiB, as a bundle, is within the bundle route's limit.
	files := map[string]string{"index.html": strings.Repeat("y", 2<<20)}
	b, _ := json.Marshal(uploadBody(a.project, files))
	if code, env := post("/v1/bundles", bytes.NewReader(b), int64(len(b)), true); code != 201 {
		t.Fatalf("a 2 MiB bundle, chunked: %d %v", code, env)
	}
}

// TestMCPBatchCaps: a batch over the entry or byte cap is refused whole,
// and every entry of an accepted batch is charged to the caller's rate
// limit.
func TestMCPBatchCaps(t *testing.T) {
	ts := start(t, server.Config{RateLimits: map[string]server.RateLimit{"mcp": {PerSecond: 0.001, Burst: 8}}})
	send := func(body string) (int, []byte) {
		req, _ := http.NewRequest("POST", "http://"+ts.Addr()+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	batch := func(n int, method string) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+1, method))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if code, b := send(batch(21, "ping")); code != 400 || !bytes.Contains(b, []byte("at most 20 messages")) {
		t.Fatalf("21 entries: %d %s", code, b)
	}
	huge := `[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("p", 2<<20) + `"}}]`
	if code, b := send(huge); code != 413 {
		t.Fatalf("a 2 MiB batch: %d %.200s", code, b)
	}
	// The bucket holds 8: a batch of 10 gets 8 answers and 2 rate-limit
	// errors; the next single message is refused with 429.
	code, b := send(batch(10, "ping"))
	var answers []map[string]any
	if err := json.Unmarshal(b, &answers); err != nil || code != 200 || len(answers) != 10 {
		t.Fatalf("batch of 10: %d %s", code, b)
	}
	limited := 0
	for _, a := range answers {
		if e, ok := a["error"].(map[string]any); ok && e["code"] == float64(-32029) {
			limited++
		}
	}
	if limited != 2 {
		t.Fatalf("%d entries rate-limited, want 2: %s", limited, b)
	}
	if code, b := send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); code != 429 || !bytes.Contains(b, []byte("rate:limited")) {
		t.Fatalf("after the bucket emptied: %d %s", code, b)
	}
}

// TestQuotasPerOrganisation: services, bundles and stored bytes are
// refused past their quotas with typed errors whose actions say what to
// do; another organisation is not affected.
func TestQuotasPerOrganisation(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db, Quotas: service.Quotas{Services: 2, Bundles: 3, StorageBytes: 1 << 20}})
		a := newAccount(t, ts, 100_000_000, service.ProjectPolicy{}, "launch", "read")
		other := newAccount(t, ts, 100_000_000, service.ProjectPolicy{}, "launch", "read")
		bundle := upload(t, ts, a, siteSaying("one"))
		var svcIDs []string
		for i := range 2 {
			r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": fmt.Sprintf("q%d", i), "target": "edge", "bundleId": bundle}, a.header())
			task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
			svcIDs = append(svcIDs, task["serviceId"].(string))
		}
		r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "q2", "target": "edge", "bundleId": bundle}, a.header())
		if r.StatusCode != 403 || r.JSON()["blockedBy"] != "quota:services" {
			t.Fatalf("third service: %d %s", r.StatusCode, r.Body)
		}
		if acts := r.JSON()["actions"].([]any); len(acts) == 0 {
			t.Fatal("no actions")
		}
		// Tearing one down makes room.
		r = ts.Client.Do("POST", "/v1/services/"+svcIDs[0]+"/teardown", nil, a.header())
		waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		r = ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "q2", "target": "edge", "bundleId": bundle}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("after a teardown: %d %s", r.StatusCode, r.Body)
		}
		// Storage: 1 MiB in all.
		r = ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, map[string]string{"big.bin": strings.Repeat("z", 2<<20)}), a.header())
		if r.StatusCode != 403 || r.JSON()["blockedBy"] != "quota:storage" {
			t.Fatalf("over storage: %d %s", r.StatusCode, r.Body)
		}
		// Bundles: three in all.
		upload(t, ts, a, siteSaying("two"))
		upload(t, ts, a, siteSaying("three"))
		r = ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, siteSaying("four")), a.header())
		if r.StatusCode != 403 || r.JSON()["blockedBy"] != "quota:bundles" {
			t.Fatalf("fourth bundle: %d %s", r.StatusCode, r.Body)
		}
		// Another organisation has its own quotas.
		upload(t, ts, other, siteSaying("mine"))
	})
}

// TestMCPNeedsBothAcceptTypes: SPEC §4 rule 1 and §7 rule 3. An initialize
// without Accept, with */* or with wildcards alone is 406, as is one naming
// only one of the two; naming both is served.
func TestMCPNeedsBothAcceptTypes(t *testing.T) {
	ts := start(t, server.Config{})
	for accept, want := range map[string]int{
		"":                                    406,
		"*/*":                                 406,
		"application/*, text/*":               406,
		"application/json":                    406,
		"application/json, text/event-stream": 200,
		"text/event-stream, application/json;q=0.9, */*;q=0.1": 200,
	} {
		req, _ := http.NewRequest("POST", "http://"+ts.Addr()+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Accept %q: %d, want %d", accept, resp.StatusCode, want)
		}
	}
}

// TestRDAPNotFoundIsAnRDAPError: RFC 7480 and RFC 9083 want an unknown
// domain answered with an RDAP error object as application/rdap+json; it
// also carries Pier's envelope members, so Pier's clients read it too.
func TestRDAPNotFoundIsAnRDAPError(t *testing.T) {
	ts := start(t, server.Config{})
	for _, accept := range []string{"application/rdap+json", "*/*"} {
		r := ts.Client.Do("GET", "/rdap/domain/never-sold-here.dev", nil, http.Header{"Accept": {accept}})
		if r.StatusCode != 404 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/rdap+json") {
			t.Fatalf("Accept %s: %d %q %s", accept, r.StatusCode, r.Header.Get("Content-Type"), r.Body)
		}
		j := r.JSON()
		desc, _ := j["description"].([]any)
		if j["errorCode"] != float64(404) || j["title"] == "" || len(desc) == 0 || j["blockedBy"] != "not_found:resource" {
			t.Errorf("not an RDAP error object with the envelope's members: %s", r.Body)
		}
	}
}
