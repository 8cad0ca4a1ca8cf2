package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// upload_blobs: several contents in one framed body.

// frames writes contents as upload_blobs takes them: "SHA256 SIZE\n" and
// the bytes; a content sent under another hash is the hash's key's.
func frames(contents ...string) []byte {
	var b bytes.Buffer
	for _, c := range contents {
		h, body, _ := strings.Cut(c, "=")
		if body == "" && !strings.Contains(c, "=") {
			h, body = sha(c), c
		}
		fmt.Fprintf(&b, "%s %d\n%s", h, len(body), body)
	}
	return b.Bytes()
}

func postBlobs(t *testing.T, ts *testServer, a account, body []byte) (int, map[string]any) {
	t.Helper()
	h := a.header()
	h.Set("Content-Type", "application/octet-stream")
	r := ts.Client.Do("POST", "/v1/blobs", body, h)
	return r.StatusCode, r.JSON()
}

// TestUploadBlobs: a batch stores every content, checked against its
// hash, once; sending it again changes nothing; a content that does not
// match is refused with nothing of it stored and what came before kept; a
// body cut short keeps what fully arrived, and the next batch sends the
// rest; the limits hold.
func TestUploadBlobs(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		var files [][2]string
		for i := range 8 {
			files = append(files, [2]string{fmt.Sprintf("p/%d.html", i), fmt.Sprintf("<p>batch %d</p>", i)})
		}
		site := newDigestSite(files)
		content := func(i int) string { return site.content[site.order[i]] }

		st, body := postBlobs(t, ts, a, frames(content(0), content(1), content(2)))
		d, _ := body["data"].(map[string]any)
		if st != 200 || d["newBlobs"] != 3.0 || len(d["blobs"].([]any)) != 3 || d["bytes"] != float64(len(content(0))+len(content(1))+len(content(2))) {
			t.Fatalf("batch: %d %v", st, body)
		}
		if got := findMissing(t, ts, a, site.manifest); strings.Join(got, ",") != strings.Join(site.order[3:], ",") {
			t.Fatalf("missing after a batch: %v", got)
		}
		// Again: a success that changes nothing.
		st, body = postBlobs(t, ts, a, frames(content(0), content(1), content(2)))
		if d := body["data"].(map[string]any); st != 200 || d["newBlobs"] != 0.0 || d["blobs"].([]any)[1].(map[string]any)["alreadyUploaded"] != true {
			t.Fatalf("the batch again: %d %v", st, body)
		}
		// Another organisation's batch is its own.
		if st, body := postBlobs(t, ts, b, frames(content(0))); st != 200 || body["data"].(map[string]any)["newBlobs"] != 1.0 {
			t.Fatalf("another organisation: %d %v", st, body)
		}

		mismatchStopsTheBatch(t, ts, a, site)

		// Cut short within content 6: 4 and 5 are kept, and the next
		// batch sends the rest.
		cut := frames(content(4), content(5), content(6))
		cut = cut[:len(cut)-3]
		if st, body := postBlobs(t, ts, a, cut); st != 400 || body["blockedBy"] != "input:invalid" || body["details"].([]any)[0].(map[string]any)["field"] != "body.2" {
			t.Fatalf("cut short: %d %v", st, body)
		}
		missing := findMissing(t, ts, a, site.manifest)
		if strings.Join(missing, ",") != strings.Join(site.order[6:], ",") {
			t.Fatalf("missing after a cut: %v", missing)
		}
		var rest []string
		for _, h := range missing {
			rest = append(rest, site.content[h])
		}
		if st, body := postBlobs(t, ts, a, frames(rest...)); st != 200 || body["data"].(map[string]any)["newBlobs"] != 2.0 {
			t.Fatalf("the rest: %d %v", st, body)
		}
		if got := findMissing(t, ts, a, site.manifest); len(got) != 0 {
			t.Fatalf("missing at the end: %v", got)
		}
		if r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "manifest": site.manifest}, a.header()); r.StatusCode != 201 {
			t.Fatalf("bundle: %d %s", r.StatusCode, r.Body)
		}

		jsonFormOfUploadBlobs(t, ts, a)
	})
}

// Content 1 does not match its hash: content 0 is stored, 1 is not, 2 is
// not read.
func mismatchStopsTheBatch(t *testing.T, ts *testServer, a account, site digestSite) {
	t.Helper()
	content := func(i int) string { return site.content[site.order[i]] }
	liar := site.order[4] + "=" + "<p>not batch 4</p>"
	st, body := postBlobs(t, ts, a, frames(content(3), liar, content(5)))
	if st != 400 || body["blockedBy"] != "input:invalid" || body["retryable"] != false ||
		body["details"].([]any)[0].(map[string]any)["field"] != "body.1" || !strings.Contains(body["message"].(string), "the 1 contents before it are stored") ||
		len(body["actions"].([]any)) == 0 {
		t.Fatalf("a mismatch: %d %v", st, body)
	}
	if got := findMissing(t, ts, a, site.manifest); strings.Join(got, ",") != strings.Join(site.order[4:], ",") {
		t.Fatalf("missing after a mismatch: %v", got)
	}
	if n := countBlob(t, ts, sha("<p>not batch 4</p>")) + countBlob(t, ts, site.order[4]); n != 0 {
		t.Fatalf("the refused content left %d rows", n)
	}
}

// The JSON form, for clients that send only JSON; a refusal in it names
// the content as sent there.
func jsonFormOfUploadBlobs(t *testing.T, ts *testServer, a account) {
	t.Helper()
	// The JSON form, for clients that send only JSON.
	j := "<p>json</p>"
	r := ts.Client.Do("POST", "/v1/blobs", map[string]any{"blobs": []any{map[string]any{"sha256": sha(j), "contentBase64": base64.StdEncoding.EncodeToString([]byte(j))}}}, a.header())
	if r.StatusCode != 200 || r.JSON()["data"].(map[string]any)["newBlobs"] != 1.0 {
		t.Fatalf("JSON form: %d %s", r.StatusCode, r.Body)
	}
	// A refusal in the JSON form names the content as sent there.
	r = ts.Client.Do("POST", "/v1/blobs", map[string]any{"blobs": []any{
		map[string]any{"sha256": sha(j), "contentBase64": base64.StdEncoding.EncodeToString([]byte(j))},
		map[string]any{"sha256": sha(j), "contentBase64": base64.StdEncoding.EncodeToString([]byte("<p>not json</p>"))}}}, a.header())
	if body := r.JSON(); r.StatusCode != 400 || body["blockedBy"] != "input:invalid" || body["details"].([]any)[0].(map[string]any)["field"] != "body.blobs.1" {
		t.Fatalf("JSON form, a mismatch: %d %s", r.StatusCode, r.Body)
	}
}

func countBlob(t *testing.T, ts *testServer, h string) int {
	t.Helper()
	var n int
	if err := ts.Store().DB().QueryRow(fmt.Sprintf(`SELECT COUNT(*) FROM blobs WHERE sha256 = '%s'`, h)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUploadBlobsLimits: at most 1,000 contents (those before the limit
// are kept), a body of at most 8 MiB (an announced length over it is
// refused before any is read), a content of at most 25 MiB, the framing,
// and a body with no content.
func TestUploadBlobsLimits(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	many := make([]string, service.MaxBatchBlobs+1)
	for i := range many {
		many[i] = fmt.Sprintf("%d", i)
	}
	st, body := postBlobs(t, ts, a, frames(many...))
	if st != 400 || body["blockedBy"] != "input:invalid" || body["details"].([]any)[0].(map[string]any)["field"] != "body.1000" ||
		!strings.Contains(body["message"].(string), "the 1000 contents before it are stored") {
		t.Fatalf("1,001 contents: %d %v", st, body)
	}
	if got := findMissing(t, ts, a, []any{entry("a", "999"), entry("b", "1000")}); len(got) != 1 || got[0] != sha("1000") {
		t.Fatalf("missing after the count limit: %v", got)
	}
	big := bytes.Repeat([]byte("x"), 8<<20)
	if st, body := postBlobs(t, ts, a, frames(string(big))); st != 413 || body["blockedBy"] != "input:body_too_large" {
		t.Fatalf("over 8 MiB: %d %v", st, body)
	}
	for name, c := range map[string]struct {
		body []byte
		code string
	}{
		"over 25 MiB announced": {[]byte(fmt.Sprintf("%s %d\nxx", sha("xx"), 26<<20)), "input:body_too_large"},
		"no frame header":       {[]byte("hello"), "input:invalid"},
		"size not a number":     {[]byte(sha("x") + " one\nx"), "input:invalid"},
		"no hash":               {[]byte("abc 1\nx"), "input:invalid"},
		"empty":                 {[]byte{}, "input:invalid"},
	} {
		if st, body := postBlobs(t, ts, a, c.body); st/100 != 4 || body["blockedBy"] != c.code {
			t.Errorf("%s: %d %v", name, st, body)
		}
	}
}

// TestUploadBlobsConcurrentOverlap: batches sent at once that share
// contents, in different orders, all succeed and store each content once
// (on PostgreSQL, rows locked in different orders deadlocked).
func TestUploadBlobsConcurrentOverlap(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		var contents []string
		for i := range 200 {
			contents = append(contents, fmt.Sprintf("<p>shared %d</p>", i))
		}
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs := slices.Clone(contents)
				rand.New(rand.NewPCG(uint64(g), 1)).Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
				if st, body := postBlobs(t, ts, a, frames(cs...)); st != 200 {
					errs <- fmt.Sprintf("batch %d: %d %v", g, st, body)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		var blobs, records int
		q := `SELECT (SELECT COUNT(*) FROM blobs WHERE sha256 IN (SELECT sha256 FROM org_blobs WHERE org_id = '` + a.org + `')), (SELECT COUNT(*) FROM org_blobs WHERE org_id = '` + a.org + `')`
		if err := ts.Store().DB().QueryRow(q).Scan(&blobs, &records); err != nil {
			t.Fatal(err)
		}
		if blobs != len(contents) || records != len(contents) {
			t.Fatalf("%d blobs and %d records, want %d of each", blobs, records, len(contents))
		}
	})
}

// TestUploadBlobsAnnouncedPastBody: a content announced larger than what
// the body limit leaves is refused at once, as too large, without its
// size being allocated; the contents before it are kept.
func TestUploadBlobsAnnouncedPastBody(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	body := append(frames("<p>first</p>"), fmt.Sprintf("%s %d\nxx", sha("xx"), 24<<20)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, resp := postBlobs(t, ts, a, body)
	runtime.ReadMemStats(&after)
	if st != 413 || resp["blockedBy"] != "input:body_too_large" || resp["details"].([]any)[0].(map[string]any)["field"] != "body.1" ||
		!strings.Contains(resp["message"].(string), "the 1 contents before it are stored") || len(resp["actions"].([]any)) == 0 {
		t.Fatalf("announced past the body: %d %v", st, resp)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Fatalf("a body of %d bytes allocated %d", len(body), n)
	}
	if got := findMissing(t, ts, a, []any{entry("first.html", "<p>first</p>")}); len(got) != 0 {
		t.Fatalf("the content before it: missing %v", got)
	}
}

// TestUploadBlobsStreamed: the body reaches the operation as it arrives.
// A client gone mid-body leaves what fully arrived stored; a chunked body
// past the limit is refused as too large.
func TestUploadBlobsStreamed(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		host := strings.TrimPrefix(ts.URL, "http://")
		// Larger than what the listener reads whole before passing a
		// request on.
		var cs []string
		var manifest []any
		for i := range 4 {
			c := strings.Repeat(fmt.Sprint(i), 10_000)
			cs = append(cs, c)
			manifest = append(manifest, entry(fmt.Sprintf("%d.txt", i), c))
		}
		body := frames(cs...)
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/blobs HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
			host, a.header().Get("Authorization"), len(body))
		c.Write(body[:len(body)-5])
		time.Sleep(200 * time.Millisecond)
		c.Close()
		var missing []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if missing = findMissing(t, ts, a, manifest); len(missing) == 1 {
				break
			}
		}
		if len(missing) != 1 || missing[0] != sha(cs[3]) {
			t.Fatalf("after the client left within content 3, missing %d: %v", len(missing), missing)
		}

		// Chunked: no length announced, cut at the limit.
		pr, pw := io.Pipe()
		go func() {
			big := strings.Repeat("x", 5<<20)
			pw.Write(frames(big, big+"y"))
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", ts.URL+"/v1/blobs", pr)
		req.Header = a.header()
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 413 || got["blockedBy"] != "input:body_too_large" || got["details"].([]any)[0].(map[string]any)["field"] != "body.1" {
			t.Fatalf("chunked past the limit: %d %v", resp.StatusCode, got)
		}
	})
}
