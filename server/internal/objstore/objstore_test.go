package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// bucket starts an in-memory S3 with one bucket, counting the requests
// that arrive unsigned.
func bucket(t *testing.T) (url string, unsigned *atomic.Int64) {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("pier"); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(backend).Server()
	unsigned = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=pier/") || r.Header.Get("X-Amz-Content-Sha256") == "" {
			unsigned.Add(1)
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), unsigned
}

func TestPutGetRoundTrip(t *testing.T) {
	endpoint, unsigned := bucket(t)
	ctx := context.Background()
	s, err := Open(ctx, "s3://pier?endpoint="+endpoint+"&insecure=true", "pier", "pier-secret")
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("<h1>hello</h1>")
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	if err := s.Put(ctx, sha, data); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, sha)
	if err != nil || string(got) != string(data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := s.PutForm(ctx, sha, "br", []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if form, err := s.GetForm(ctx, sha, "br"); err != nil || len(form) != 3 {
		t.Fatalf("GetForm = %v, %v", form, err)
	}
	if _, err := s.Get(ctx, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing blob: err = %v, want a 404", err)
	}
	if n := unsigned.Load(); n != 0 {
		t.Fatalf("%d requests went out unsigned", n)
	}
}

func TestGetRefusesOtherContent(t *testing.T) {
	endpoint, _ := bucket(t)
	ctx := context.Background()
	s, err := Open(ctx, "s3://pier?endpoint="+endpoint+"&insecure=true", "pier", "pier-secret")
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("a", 64)
	if err := s.Put(ctx, sha, []byte("not what the name says")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, sha); err == nil || !strings.Contains(err.Error(), "other content") {
		t.Fatalf("err = %v, want other content", err)
	}
}

func TestOpenNamesAMissingBucket(t *testing.T) {
	endpoint, _ := bucket(t)
	_, err := Open(context.Background(), "s3://nope?endpoint="+endpoint+"&insecure=true", "pier", "pier-secret")
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v, want does not exist", err)
	}
	if _, err := Open(context.Background(), "http://x", "k", "s"); err == nil {
		t.Fatal("a non-s3 URL was accepted")
	}
}
