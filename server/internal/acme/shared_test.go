package acme

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/pierhq/pier/server/internal/acme/acmetest"
)

// memShared stands for the database replicas share.
type memShared struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memShared) Put(_ context.Context, k, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return nil
}

func (s *memShared) Get(_ context.Context, k string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	if !ok {
		return "", errors.New("not found")
	}
	return v, nil
}

func (s *memShared) Delete(_ context.Context, k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

// Two replicas behind one balancer: a challenge one presented is answered
// by the other, and a certificate one obtained is served by the other
// without asking the ACME server again.
func TestReplicasShareChallengesAndCertificates(t *testing.T) {
	p := acmetest.New(t)
	p.Start(acmetest.Options{AlwaysValid: true})
	shared := &memShared{m: map[string]string{}}
	replica := func() *Issuer {
		i, err := New(Config{Directory: p.DirectoryURL, CAFile: p.CAFile, Email: "ops@example.test", Dir: t.TempDir(),
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	a, b := replica(), replica()

	if err := (*provider)(a).Present("shop.example.test", "tok123", "tok123.keyauth"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	b.ServeHTTP(rec, httptest.NewRequest("GET", "http://shop.example.test"+ChallengePrefix+"tok123", nil))
	if rec.Code != 200 || rec.Body.String() != "tok123.keyauth" {
		t.Fatalf("the other replica answered %d %q", rec.Code, rec.Body.String())
	}
	(*provider)(a).CleanUp("shop.example.test", "tok123", "tok123.keyauth")
	rec = httptest.NewRecorder()
	b.ServeHTTP(rec, httptest.NewRequest("GET", "http://shop.example.test"+ChallengePrefix+"tok123", nil))
	if rec.Code != 404 {
		t.Fatalf("a cleaned-up challenge is still answered: %d", rec.Code)
	}

	const host = "shop--prj-abc.example.test"
	got, err := a.Certificate(host)
	if err != nil {
		t.Fatal(err)
	}
	if b.load(host) == nil {
		t.Fatal("the other replica does not see the certificate")
	}
	again, err := b.Certificate(host)
	if err != nil || !bytes.Equal(again.Certificate[0], got.Certificate[0]) {
		t.Fatalf("the other replica serves another certificate: %v", err)
	}
}
