package clitest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FakeBlobs is the digest upload's side of a fake API: which content the
// organisation has uploaded, what each upload sent, and how many uploads
// ran at once.
type FakeBlobs struct {
	Mu                    sync.Mutex
	Stored                map[string]int
	Puts                  []string
	Inflight, MaxInflight int
	// FailAfter, when positive, fails every upload after that many.
	FailAfter int
	// Chunked counts uploads sent without a Content-Length.
	Chunked int
	// Active counts requests being served.
	Active atomic.Int64
	// Finds counts find_missing_blobs requests, batches upload_blobs
	// requests.
	Finds            atomic.Int64
	Batches, Singles int
	// Bundles are the bundles made, their files by path; fromBase counts
	// the bundles asked for from a base, entriesSent the manifest
	// entries and paths upload_assets was sent.
	Bundles               map[string]map[string]string
	FromBase, EntriesSent int
}

// Register serves find_missing_blobs and upload_blob on mux.
func (fb *FakeBlobs) Register(t *testing.T, mux *http.ServeMux) {
	fb.Stored = map[string]int{}
	mux.HandleFunc("POST /v1/bundles/missing", fb.findMissing(t))
	mux.HandleFunc("POST /v1/blobs", fb.uploadBlobs(t))
	mux.HandleFunc("PUT /v1/blobs/{sha256}", fb.uploadBlob(t))
}

// findMissing answers find_missing_blobs: the contents of the manifest not yet stored.
func (fb *FakeBlobs) findMissing(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fb.Finds.Add(1)
		var req struct {
			ProjectID string `json:"projectId"`
			Manifest  []struct {
				Path   string `json:"path"`
				Size   int    `json:"size"`
				SHA256 string `json:"sha256"`
			} `json:"manifest"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ProjectID == "" {
			t.Errorf("find_missing_blobs: %v %+v", err, req)
		}
		fb.Mu.Lock()
		missing, seen := []string{}, map[string]bool{}
		bytes, total := 0, 0
		for _, f := range req.Manifest {
			total += f.Size
			if _, ok := fb.Stored[f.SHA256]; !ok && !seen[f.SHA256] {
				seen[f.SHA256] = true
				missing = append(missing, f.SHA256)
				bytes += f.Size
			}
		}
		fb.Mu.Unlock()
		list, _ := json.Marshal(missing)
		WriteEnvelope(w, 200, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"data":{"missing":%s,"missingBytes":%d,"fileCount":%d,"totalBytes":%d},"formatVersion":"1"}`,
			list, bytes, len(req.Manifest), total))
	}
}

// uploadBlobs answers upload_blobs: "SHA256 SIZE\n" and the bytes, for each
// content; each is kept as it arrives, and failAfter counts contents.
func (fb *FakeBlobs) uploadBlobs(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fb.Mu.Lock()
		fb.Inflight++
		fb.Batches++
		fb.MaxInflight = max(fb.MaxInflight, fb.Inflight)
		if r.ContentLength < 0 {
			fb.Chunked++
		}
		fb.Mu.Unlock()
		defer func() { fb.Mu.Lock(); fb.Inflight--; fb.Mu.Unlock() }()
		if r.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("upload_blobs sent %q", r.Header.Get("Content-Type"))
		}
		time.Sleep(5 * time.Millisecond) // long enough for the uploads to overlap
		br := bufio.NewReader(r.Body)
		var blobs []string
		total := 0
		for {
			line, err := br.ReadString('\n')
			if err == io.EOF && line == "" {
				break
			}
			want, num, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
			size, _ := strconv.Atoi(num)
			data := make([]byte, size)
			if _, err := io.ReadFull(br, data); err != nil {
				t.Errorf("upload_blobs: a content cut short: %v", err)
				return
			}
			h := sha256.Sum256(data)
			got := hex.EncodeToString(h[:])
			fb.Mu.Lock()
			n := len(fb.Puts)
			fb.Mu.Unlock()
			if fb.FailAfter > 0 && n >= fb.FailAfter {
				WriteEnvelope(w, 503, `{"actions":[{"kind":"stop","reason":"done"}],"blockedBy":"internal:unavailable","message":"going down","retryable":true,"formatVersion":"1"}`)
				return
			}
			if got != want {
				WriteEnvelope(w, 400, `{"actions":[{"kind":"stop","reason":"done"}],"blockedBy":"input:invalid","message":"mismatch","retryable":false,"formatVersion":"1"}`)
				return
			}
			fb.Mu.Lock()
			_, had := fb.Stored[got]
			fb.Stored[got] = size
			fb.Puts = append(fb.Puts, got)
			fb.Mu.Unlock()
			blobs = append(blobs, fmt.Sprintf(`{"sha256":%q,"size":%d,"alreadyUploaded":%t}`, got, size, had))
			total += size
		}
		WriteEnvelope(w, 200, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"data":{"blobs":[%s],"newBlobs":%d,"bytes":%d},"formatVersion":"1"}`, strings.Join(blobs, ","), len(blobs), total))
	}
}

// uploadBlob answers upload_blob: one content, kept when its digest matches.
func (fb *FakeBlobs) uploadBlob(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fb.Mu.Lock()
		fb.Inflight++
		fb.MaxInflight = max(fb.MaxInflight, fb.Inflight)
		n := len(fb.Puts)
		if r.ContentLength < 0 {
			fb.Chunked++
		}
		fb.Mu.Unlock()
		fb.Mu.Lock()
		fb.Singles++
		fb.Mu.Unlock()
		defer func() { fb.Mu.Lock(); fb.Inflight--; fb.Mu.Unlock() }()
		if r.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("upload_blob sent %q", r.Header.Get("Content-Type"))
		}
		time.Sleep(5 * time.Millisecond) // long enough for the uploads to overlap
		if fb.FailAfter > 0 && n >= fb.FailAfter {
			WriteEnvelope(w, 503, `{"actions":[{"kind":"stop","reason":"done"}],"blockedBy":"internal:unavailable","message":"going down","retryable":true,"formatVersion":"1"}`)
			return
		}
		h := sha256.New()
		size, _ := io.Copy(h, r.Body)
		got := hex.EncodeToString(h.Sum(nil))
		if got != r.PathValue("sha256") {
			WriteEnvelope(w, 400, `{"actions":[{"kind":"stop","reason":"done"}],"blockedBy":"input:invalid","message":"mismatch","retryable":false,"formatVersion":"1"}`)
			return
		}
		fb.Mu.Lock()
		_, had := fb.Stored[got]
		fb.Stored[got] = int(size)
		fb.Puts = append(fb.Puts, got)
		fb.Mu.Unlock()
		WriteEnvelope(w, 200, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"data":{"sha256":%q,"size":%d,"alreadyUploaded":%t},"formatVersion":"1"}`, got, size, had))
	}
}
