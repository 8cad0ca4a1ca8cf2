package edge

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// oneProcess is a Sites with one process service answering at addr.
type oneProcess struct{ addr, state, target string }

func (o oneProcess) ServiceByHost(_ context.Context, host string) (store.Service, error) {
	if host != "app.example.test" {
		return store.Service{}, store.ErrNotFound
	}
	return store.Service{ID: "svc_1", Target: o.target, State: o.state, Upstream: o.addr, UpdatedAt: time.Unix(1, 0)}, nil
}
func (oneProcess) Bundle(context.Context, string, string) (store.Bundle, error) {
	return store.Bundle{}, errors.New("a process has no bundle to serve")
}
func (oneProcess) Blob(context.Context, string) ([]byte, error) { return nil, errors.New("no blobs") }
func (oneProcess) BlobWithForms(context.Context, string) (store.BlobWithForms, error) {
	return store.BlobWithForms{}, errors.New("no blobs")
}
func (oneProcess) PutBlobForms(context.Context, string, store.Forms) error {
	return errors.New("no blobs")
}

// The edge proxies a process's host: the Host and X-Forwarded-* reach it,
// a streamed answer arrives as it is written, and a WebSocket upgrade
// becomes a two-way connection.
func TestProxyStreamsAndUpgrades(t *testing.T) {
	upstream := streamingUpstream(t)
	defer upstream.Close()
	e := New(oneProcess{addr: strings.TrimPrefix(upstream.URL, "http://"), state: "live", target: "process"}, slog.Default())
	front := httptest.NewServer(e)
	defer front.Close()

	req, _ := http.NewRequest("GET", front.URL+"/who", nil)
	req.Host = "app.example.test"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "app.example.test app.example.test http" {
		t.Fatalf("what the process saw: %q", b)
	}

	req, _ = http.NewRequest("GET", front.URL+"/stream", nil)
	req.Host = "app.example.test"
	start := time.Now()
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if first != "data: tick\n" || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("the first event came after %s: %q", time.Since(start), first)
	}

	c, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: app.example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	if !strings.HasPrefix(status, "HTTP/1.1 101") {
		t.Fatalf("upgrade answered %q", status)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	io.WriteString(c, "hello over the upgraded connection\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, _ := br.ReadString('\n'); got != "echo hello over the upgraded connection\n" {
		t.Fatalf("after the upgrade: %q", got)
	}
}

// streamingUpstream is a process that says which host it was asked for
// (/who), streams three events 300 ms apart (/stream) and echoes a line
// after a websocket upgrade (/ws).
func streamingUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/who":
			io.WriteString(w, r.Host+" "+r.Header.Get("X-Forwarded-Host")+" "+r.Header.Get("X-Forwarded-Proto"))
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < 3; i++ {
				io.WriteString(w, "data: tick\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(300 * time.Millisecond)
			}
		case "/ws":
			if r.Header.Get("Upgrade") != "websocket" {
				http.Error(w, "want an upgrade", 400)
				return
			}
			c, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			rw.Flush()
			line, _ := rw.ReadString('\n')
			rw.WriteString("echo " + line)
			rw.Flush()
		}
	}))
}

// A crashed process and a worker answer 503 with why, not a proxy error.
func TestProcessWithNothingToProxyTo(t *testing.T) {
	for _, tc := range []struct{ state, target, want string }{
		{"crashed", "process", "crashed"},
		{"live", "worker", "worker"},
	} {
		e := New(oneProcess{state: tc.state, target: tc.target, addr: "127.0.0.1:1"}, slog.Default())
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "http://app.example.test/", nil)
		e.ServeHTTP(w, r)
		if w.Code != 503 || !strings.Contains(w.Body.String(), tc.want) {
			t.Fatalf("%s %s: %d %q", tc.state, tc.target, w.Code, w.Body.String())
		}
	}
}
