package fastpath

import (
	"context"
	"log/slog"
	"testing"

	"github.com/pierhq/pier/server/internal/nameindex"
)

// TestUnknownHostSameAnswers: with the host index on, a host no site has
// is answered 404 on the fast path, from memory, with the bytes net/http
// writes for it, HEAD, a port, upper case and Connection: close included;
// a host the index holds is served as before.
func TestUnknownHostSameAnswers(t *testing.T) {
	e := newEdge(t)
	x := nameindex.New("hosts", func(context.Context, int64) ([]nameindex.Name, error) {
		return []nameindex.Name{{Name: siteHost, Added: 1}}, nil
	}, slog.New(slog.DiscardHandler))
	if err := x.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.UseNames(x)
	ref := serve(t, e, false, Config{})
	fast := serve(t, e, true, Config{})
	for _, c := range []sameAnswerCase{
		{"no site", "GET / HTTP/1.1\r\nHost: nobody.localhost\r\n\r\n", false, false},
		{"no site, a path", "GET /a/b.css?x=1 HTTP/1.1\r\nHost: r1f2e3.localhost\r\n\r\n", false, false},
		{"no site, head", "HEAD / HTTP/1.1\r\nHost: nobody.localhost\r\n\r\n", true, false},
		{"no site, port", "GET / HTTP/1.1\r\nHost: nobody.localhost:8080\r\n\r\n", false, false},
		{"no site, upper case", "GET / HTTP/1.1\r\nHost: NoBody.LocalHost\r\n\r\n", false, false},
		{"no site, close", "GET / HTTP/1.1\r\nHost: nobody.localhost\r\nConnection: close\r\n\r\n", false, false},
		{"no site, HTTP/1.0", "GET / HTTP/1.0\r\nHost: nobody.localhost\r\n\r\n", false, false},
		{"site", get("/1k.txt"), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := exchange(t, ref.addr, c.raw, 1, c.head)[0]
			before := fast.handoffs()
			got := exchange(t, fast.addr, c.raw, 1, c.head)[0]
			if got.String() != want.String() {
				t.Errorf("fast path answered\n%s\nnet/http answered\n%s", got, want)
			}
			if handed := fast.handoffs() > before; handed != c.handoff {
				t.Errorf("handed to net/http: %v, want %v", handed, c.handoff)
			}
		})
	}
}
