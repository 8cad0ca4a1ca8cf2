package fastpath

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/edge"
)

// Bodies around edge.SendfileMin: the fast path sends those of at least
// that size with sendfile(2) (on Linux), the others from memory.
func init() {
	siteFiles["sf/under.bin"] = noise(edge.SendfileMin - 1)
	siteFiles["sf/exact.bin"] = noise(edge.SendfileMin)
	siteFiles["sf/64k.bin"] = noise(64 << 10)
	siteFiles["sf/1m.bin"] = noise(1 << 20)
	// Text of hex digits: its gzip and brotli forms are about half its
	// size, so both are above the threshold too.
	siteFiles["sf/large.txt"] = hex.EncodeToString([]byte(noise(96 << 10)))
	// Its forms are under the threshold, the body above.
	siteFiles["sf/small-forms.txt"] = strings.Repeat("0123456789abcdef\n", 4<<10)
}

// noise is n bytes that do not compress, the same on every run.
func noise(n int) string {
	var b strings.Builder
	sum := sha256.Sum256([]byte("pier"))
	for b.Len() < n {
		b.Write(sum[:])
		sum = sha256.Sum256(sum[:])
	}
	return b.String()[:n]
}

// TestSendfileSameAnswers: the answers the fast path sends with sendfile
// are net/http's and the edge handler's, byte for byte but for Date, for
// every file, encoding and request kind (ranges are not served: a Range
// header gets the whole body, as from the handler); bodies under the
// threshold are not sent with it.
func TestSendfileSameAnswers(t *testing.T) {
	e := newEdge(t)
	ref := serve(t, e, false, Config{})
	fast := serve(t, e, true, Config{})
	linux := runtime.GOOS == "linux"
	type sfCase struct {
		sameAnswerCase
		sendfile bool // sent with sendfile on Linux
	}
	var cases []sfCase
	for _, p := range []string{"/sf/under.bin", "/sf/exact.bin", "/sf/64k.bin", "/sf/1m.bin", "/sf/large.txt", "/sf/small-forms.txt"} {
		big := p != "/sf/under.bin"
		etag := exchange(t, ref.addr, get(p), 1, false)[0].header.Get("Etag")
		gzTag := exchange(t, ref.addr, get(p, "Accept-Encoding: gzip\r\n"), 1, false)[0].header.Get("Etag")
		formBig := p == "/sf/large.txt"
		cases = append(cases,
			sfCase{sameAnswerCase{p, get(p), false, false}, big},
			sfCase{sameAnswerCase{p + " head", "HEAD " + p + " HTTP/1.1\r\nHost: " + siteHost + "\r\n\r\n", true, false}, false},
			sfCase{sameAnswerCase{p + " 304", get(p, "If-None-Match: "+etag+"\r\n"), false, false}, false},
			sfCase{sameAnswerCase{p + " inm other", get(p, "If-None-Match: \"x\"\r\n"), false, false}, big},
			sfCase{sameAnswerCase{p + " range", get(p, "Range: bytes=0-99\r\n"), false, false}, big},
			sfCase{sameAnswerCase{p + " range suffix", get(p, "Range: bytes=-10\r\n"), false, false}, big},
			sfCase{sameAnswerCase{p + " gzip", get(p, "Accept-Encoding: gzip\r\n"), false, false}, big && (formBig || gzTag == etag)},
			sfCase{sameAnswerCase{p + " br", get(p, "Accept-Encoding: br\r\n"), false, false}, big && (formBig || gzTag == etag)},
			sfCase{sameAnswerCase{p + " gzip 304", get(p, "Accept-Encoding: gzip\r\nIf-None-Match: "+gzTag+"\r\n"), false, false}, false},
			sfCase{sameAnswerCase{p + " head gzip", "HEAD " + p + " HTTP/1.1\r\nHost: " + siteHost + "\r\nAccept-Encoding: gzip\r\n\r\n", true, false}, false},
			sfCase{sameAnswerCase{p + " close", get(p, "Connection: close\r\n"), false, false}, big},
			sfCase{sameAnswerCase{p + " http10", "GET " + p + " HTTP/1.0\r\nHost: " + siteHost + "\r\n\r\n", false, false}, big},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := exchange(t, ref.addr, c.raw, 1, c.head)[0]
			before, sent := fast.handoffs(), fast.ln.sendfiles.Load()
			got := exchange(t, fast.addr, c.raw, 1, c.head)[0]
			if got.String() != want.String() {
				t.Errorf("fast path answered\n%.600s\nnet/http answered\n%.600s", got, want)
			}
			if fast.handoffs() != before {
				t.Error("handed to net/http")
			}
			if used := fast.ln.sendfiles.Load() > sent; used != (c.sendfile && linux) {
				t.Errorf("sent with sendfile: %v, want %v", used, c.sendfile && linux)
			}
		})
	}
}

// TestSendfilePipelined: answers sent with sendfile keep their place among
// pipelined answers written from memory, and a reader slower than the
// socket's buffers still gets every byte.
func TestSendfilePipelined(t *testing.T) {
	e := newEdge(t)
	fast := serve(t, e, true, Config{})
	ref := serve(t, e, false, Config{})
	one := get("/1k.txt") + get("/sf/1m.bin") + get("/sf/under.bin") + get("/sf/large.txt", "Accept-Encoding: br\r\n") +
		"HEAD /sf/64k.bin HTTP/1.1\r\nHost: " + siteHost + "\r\n\r\n" + get("/sf/64k.bin")
	raw := strings.Repeat(one, 4)
	heads := []bool{false, false, false, false, true, false}
	read := func(addr string, slow bool) []answer {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		go io.WriteString(c, raw)
		var r io.Reader = c
		if slow {
			r = &slowReader{r: c}
		}
		br := bufio.NewReader(r)
		var out []answer
		for i := range 4 * len(heads) {
			out = append(out, readAnswers(t, br, 1, heads[i%len(heads)])...)
		}
		return out
	}
	want := read(ref.addr, false)
	before := fast.ln.sendfiles.Load()
	for _, slow := range []bool{false, true} {
		got := read(fast.addr, slow)
		for i := range want {
			if got[i].String() != want[i].String() {
				t.Fatalf("slow %v, answer %d:\n%.300s\nwant\n%.300s", slow, i, got[i], want[i])
			}
		}
	}
	if runtime.GOOS == "linux" && fast.ln.sendfiles.Load()-before != 2*4*3 {
		t.Errorf("%d bodies sent with sendfile, want %d", fast.ln.sendfiles.Load()-before, 2*4*3)
	}
	if fast.handoffs() != 0 {
		t.Fatal("handed off")
	}
}

// slowReader reads a little at a time with pauses, so that the server's
// socket buffer fills and sendfile has to wait for room.
type slowReader struct {
	r io.Reader
	n int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n++; s.n%64 == 0 {
		time.Sleep(time.Millisecond)
	}
	return s.r.Read(p[:min(len(p), 4096)])
}
