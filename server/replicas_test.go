package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// Two replicas on one PostgreSQL share their rate limits: callers spreading
// requests over both get what one replica would allow, not twice as much.
func TestRateLimitsHoldAcrossReplicas(t *testing.T) {
	db := testpg.NewDatabase(t)
	limits := map[string]server.RateLimit{"search": {PerSecond: 2, Burst: 5}}
	a := start(t, server.Config{DatabaseURL: db, RateLimits: limits})
	b := start(t, server.Config{DatabaseURL: db, RateLimits: limits})
	began := time.Now()
	allowed := 0
	for i := range 30 {
		ts := a
		if i%2 == 1 {
			ts = b
		}
		r, err := http.Get(ts.URL + "/v1/domains/search?q=replica" + string(rune('a'+i%26)))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		switch r.StatusCode {
		case 200:
			allowed++
		case 429:
		default:
			t.Fatalf("status %d", r.StatusCode)
		}
	}
	// At most the limit over the window plus one burst.
	if most := 5 + int(2*time.Since(began).Seconds()) + 1; allowed > most {
		t.Fatalf("%d allowed across two replicas, at most %d", allowed, most)
	}
	if allowed < 5 {
		t.Fatalf("only %d allowed; the burst is 5", allowed)
	}
}

// httpStatus fetches / for host over a replica's HTTP listener.
func httpStatus(t *testing.T, ts *testServer, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+ts.Addr()+"/", nil)
	req.Host = host
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	return r.StatusCode, string(b)
}

// within polls a replica until host answers want, and says how long that
// took after since.
func within(t *testing.T, ts *testServer, host string, want int, since time.Time) time.Duration {
	t.Helper()
	for time.Since(since) < 5*time.Second {
		if code, _ := httpStatus(t, ts, host); code == want {
			return time.Since(since)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d", host, want)
	return 0
}

// A launch through one replica is served by another at once, and a
// teardown stops on both: the edge caches hear of it over LISTEN/NOTIFY,
// not only at their next revalidation.
func TestReplicasServeWhatAnotherLaunched(t *testing.T) {
	db := testpg.NewDatabase(t)
	a := start(t, server.Config{DatabaseURL: db})
	b := start(t, server.Config{DatabaseURL: db})
	acct := newAccount(t, a, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	bundle := upload(t, a, acct, siteSaying("shared"))
	host := a.Service().PreviewHost("shared", acct.project)
	// The other replica has already been asked, and remembers "no site".
	if code, _ := httpStatus(t, b, host); code != 404 {
		t.Fatalf("before the launch: %d", code)
	}
	r := a.Client.Do("POST", "/v1/projects/"+acct.project+"/launch", map[string]any{"name": "shared", "target": "edge", "bundleId": bundle}, acct.header())
	data := r.JSON()["data"].(map[string]any)
	waitTask(t, a, acct, data["taskId"].(string), "succeeded")
	if d := within(t, b, host, 200, time.Now()); d > time.Second {
		t.Fatalf("the other replica served the launch after %s", d)
	}
	td := a.Client.Do("POST", "/v1/services/"+data["serviceId"].(string)+"/teardown", nil, acct.header())
	waitTask(t, a, acct, td.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if d := within(t, b, host, 404, time.Now()); d > time.Second {
		t.Fatalf("the other replica stopped serving after %s", d)
	}
}

// Replicas on one database sign with one local CA.
func TestReplicasShareTheLocalCA(t *testing.T) {
	db := testpg.NewDatabase(t)
	a := start(t, server.Config{DatabaseURL: db})
	b := start(t, server.Config{DatabaseURL: db})
	if !bytes.Equal(a.CARootPEM(), b.CARootPEM()) {
		t.Fatal("two replicas, two CAs")
	}
}

// PostgreSQL restarts under two replicas: both recover on their own, and
// what one launches afterwards the other serves at once again (the
// invalidation listener reconnected).
func TestReplicasRecoverFromADatabaseRestart(t *testing.T) {
	db := testpg.NewDatabase(t)
	a := start(t, server.Config{DatabaseURL: db})
	b := start(t, server.Config{DatabaseURL: db})
	acct := newAccount(t, a, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	testpg.Restart(t)
	for _, ts := range []*testServer{a, b} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := ts.Client.Do("GET", "/v1/projects", nil, acct.header())
			if r.StatusCode == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a replica did not recover: %d %s", r.StatusCode, r.Body)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	bundle := upload(t, a, acct, siteSaying("after the restart"))
	host := a.Service().PreviewHost("after", acct.project)
	if code, _ := httpStatus(t, b, host); code != 404 {
		t.Fatalf("before the launch: %d", code)
	}
	time.Sleep(6 * time.Second) // the listener's reconnection backoff, at most 5 s
	r := a.Client.Do("POST", "/v1/projects/"+acct.project+"/launch", map[string]any{"name": "after", "target": "edge", "bundleId": bundle}, acct.header())
	waitTask(t, a, acct, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if d := within(t, b, host, 200, time.Now()); d > time.Second {
		t.Fatalf("after the restart the other replica served the launch after %s", d)
	}
}

// Blob bodies can live in an S3-compatible bucket (here gofakes3, in
// process): a site uploaded and launched is served from it, and the
// database keeps only the record of each blob.
func TestBlobsInAnObjectStore(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("pier"); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s3.Close)
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db, BlobStore: "s3://pier?endpoint=" + strings.TrimPrefix(s3.URL, "http://") + "&insecure=true",
			BlobStoreKey: "pier", BlobStoreSecret: "pier-secret"})
		acct := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		page := "<!doctype html><h1>from the bucket</h1>" + strings.Repeat("<p>A page long enough to compress.</p>\n", 40)
		bundle := upload(t, ts, acct, map[string]string{"index.html": page})
		r := ts.Client.Do("POST", "/v1/projects/"+acct.project+"/launch", map[string]any{"name": "bucket", "target": "edge", "bundleId": bundle}, acct.header())
		waitTask(t, ts, acct, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		code, body := httpStatus(t, ts, ts.Service().PreviewHost("bucket", acct.project))
		if code != 200 || !strings.Contains(body, "from the bucket") {
			t.Fatalf("served: %d %q", code, body)
		}
		var outside int
		if err := ts.Store().DB().QueryRow(`SELECT COUNT(*) FROM blobs WHERE size > 0 AND size <> LENGTH(data)`).Scan(&outside); err != nil || outside == 0 {
			t.Fatalf("no blob body left the database: %d %v", outside, err)
		}
		list, err := backend.ListBucket("pier", nil, gofakes3.ListBucketPage{})
		if err != nil || len(list.Contents) == 0 {
			t.Fatalf("the bucket holds nothing: %v", err)
		}
		// The page's compressed forms, made when it was first served, are
		// kept in the bucket too, and read back from it.
		sum := sha256.Sum256([]byte(page))
		sha := hex.EncodeToString(sum[:])
		keys := map[string]bool{}
		for _, o := range list.Contents {
			keys[o.Key] = true
		}
		if !keys["blobs/"+sha+".gzip"] || !keys["blobs/"+sha+".br"] {
			t.Fatalf("the bucket holds %v, not the page's forms", keys)
		}
		bf, err := ts.Store().Bundles().BlobWithForms(context.Background(), sha)
		if err != nil || string(bf.Data) != page || !bf.Made || len(bf.Forms.Gzip) == 0 || len(bf.Forms.Brotli) == 0 {
			t.Fatalf("the page and its forms from the bucket: %d, %d, %d bytes, %v", len(bf.Data), len(bf.Forms.Gzip), len(bf.Forms.Brotli), err)
		}
	})
}
