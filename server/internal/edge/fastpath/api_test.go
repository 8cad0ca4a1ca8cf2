package fastpath

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/rawhttp"
)

// keptRead stands in for the API's kept answers: it answers /kept as the
// test handler does (handler in fastpath_test.go), and nothing else.
func keptRead(dst []byte, q *APIRequest) (head, body []byte, ok bool) {
	if string(q.Path) != "/kept" {
		return dst, nil, false
	}
	body = fmt.Appendf(nil, "api %s %s %d", q.Method, q.Path, len(q.Body))
	dst = append(dst, "HTTP/1.1 200 OK\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	return append(dst, "\r\nContent-Type: text/plain\r\n"...), body, true
}

func apiPost(path, body string, extra ...string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n%s\r\n%s", path, len(body), strings.Join(extra, ""), body)
}

// Requests for the API that APIRead answers are answered on the fast
// path, with the bytes net/http would send for the same handler; the
// others, and the rest of their connection, go to net/http with what was
// read of them.
func TestAPIReadSameAnswers(t *testing.T) {
	e := newEdge(t)
	ref := serve(t, e, false, Config{})
	fast := serve(t, e, true, Config{APIRead: keptRead})
	apiGet := func(path string, extra ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n" + strings.Join(extra, "") + "\r\n"
	}
	one, two := []bool{false}, []bool{false, false}
	big := strings.Repeat("x", maxHead)
	cases := []struct {
		name    string
		raw     string
		split   int
		heads   []bool
		handoff bool
	}{
		{"get", apiGet("/kept"), 0, one, false},
		{"post", apiPost("/kept", "hello"), 0, one, false},
		{"body later", apiPost("/kept", "hello"), len(apiPost("/kept", "hello")) - 5, one, false},
		{"body cut", apiPost("/kept", "hello"), len(apiPost("/kept", "hello")) - 2, one, false},
		{"close", apiGet("/kept", "Connection: close\r\n"), 0, one, false},
		{"pipelined", apiGet("/kept") + apiPost("/kept", "ab") + apiGet("/kept"), 0, []bool{false, false, false}, false},
		{"not kept", apiGet("/other"), 0, one, true},
		{"not kept, body read by net/http", apiPost("/other", "hello"), 0, one, true},
		{"kept, then not", apiGet("/kept") + apiPost("/other", "abc") + apiGet("/kept"), 0, []bool{false, false, false}, true},
		{"body over the cap", apiPost("/kept", strings.Repeat("a", maxAPIBody+1)), 0, one, true},
		{"head and body over the buffer", apiPost("/kept", strings.Repeat("a", maxAPIBody), "X-Pad: "+big[:maxHead-maxAPIBody]+"\r\n"), 0, one, true},
		{"chunked", "POST /kept HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", 0, one, true},
		{"HEAD", "HEAD /kept HTTP/1.1\r\nHost: localhost\r\n\r\n", 0, []bool{true}, true},
		{"PUT", "PUT /kept HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", 0, one, true},
		{"escaped", apiGet("/%6bept"), 0, one, true},
		{"site host", "GET /kept HTTP/1.1\r\nHost: " + siteHost + "\r\n\r\n", 0, one, false},
		{"two", apiGet("/kept") + apiGet("/kept"), 0, two, false},
		{"the API, then a site, then the API", apiGet("/kept") + get("/1k.txt") + apiPost("/kept", "x"), 0, []bool{false, false, false}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wantClosed := splitExchange(t, ref.addr, c.raw, c.split, c.heads...)
			before := fast.handoffs()
			got, gotClosed := splitExchange(t, fast.addr, c.raw, c.split, c.heads...)
			if len(want) != len(got) {
				t.Fatalf("%d answers, net/http %d", len(got), len(want))
			}
			for i := range want {
				if w, g := want[i].String(), got[i].String(); w != g {
					t.Errorf("answer %d:\nfast path:\n%s\nnet/http:\n%s", i+1, g, w)
				}
			}
			if gotClosed != wantClosed {
				t.Errorf("connection closed: %v, net/http %v", gotClosed, wantClosed)
			}
			if handed := fast.handoffs() > before; handed != c.handoff {
				t.Errorf("handed to net/http: %v, want %v", handed, c.handoff)
			}
		})
	}
}

// splitExchange is rawExchange with raw sent in two writes a moment
// apart, cut at split (when set).
func splitExchange(t *testing.T, addr, raw string, split int, heads ...bool) ([]rawhttp.Answer, bool) {
	t.Helper()
	if split == 0 {
		return rawExchange(t, addr, raw, heads...)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, raw[:split])
	time.Sleep(50 * time.Millisecond)
	io.WriteString(c, raw[split:])
	return rawhttp.Read(c, heads...)
}
