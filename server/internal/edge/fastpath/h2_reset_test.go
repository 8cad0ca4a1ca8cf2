package fastpath

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A client that opens streams and resets them at once (CVE-2023-44487's
// rapid reset) spends the connection's reset budget: after at most about
// h2ResetBurst of 20,000 HEADERS+RST_STREAM pairs the fast path sends
// GOAWAY(ENHANCE_YOUR_CALM) and closes the connection.
func TestH2RapidResetGoAway(t *testing.T) {
	e := newEdge(t)
	s := serveH2(t, e, true, Config{})
	c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, ServerName: siteHost, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	bw := bufio.NewWriterSize(c, 64<<10)
	fr := http2.NewFramer(bw, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	io.WriteString(bw, http2.ClientPreface)
	fr.WriteSettings()
	bw.Flush()

	const pairs = 20000
	sent := make(chan int, 1)
	go func() {
		var hbuf bytesBuffer
		enc := hpack.NewEncoder(&hbuf)
		n := 0
		defer func() { sent <- n }()
		for ; n < pairs; n++ {
			id := uint32(2*n + 1)
			hbuf.Reset()
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", siteHost}, {":path", "/about"}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.b, EndStream: true, EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
			if n%64 == 63 && bw.Flush() != nil {
				return
			}
		}
		bw.Flush()
	}()

	var goAway *http2.GoAwayFrame
	for goAway == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the connection ended with %v and no GOAWAY after %d HEADERS+RST pairs", err, pairs)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			// Not acknowledged: the writer owns the framer's write side.
		case *http2.GoAwayFrame:
			goAway = f
		}
	}
	if goAway.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", goAway.ErrCode)
	}
	// The streams it answered: the burst, and what the budget regained
	// while the flood lasted (well under a second's worth here).
	if served := goAway.LastStreamID/2 + 1; served > 2*h2ResetBurst {
		t.Errorf("GOAWAY after %d streams, want about %d", served, h2ResetBurst)
	}
	for {
		if _, err := fr.ReadFrame(); err != nil {
			if !errors.Is(err, io.EOF) && !isConnReset(err) {
				t.Fatalf("after GOAWAY: %v, want the connection closed", err)
			}
			break
		}
	}
	c.Close()
	<-sent
}

// A browser cancelling a page's worth of streams at once, then asking for
// more, stays within the budget: no GOAWAY.
func TestH2ResetsWithinBudget(t *testing.T) {
	e := newEdge(t)
	s := serveH2(t, e, true, Config{})
	r := dialRaw(t, s.addr, siteHost)
	r.exchange(nil, nil)
	next := uint32(1)
	for round := range 2 {
		for range h2MaxStreams {
			r.request(next, "GET", "/about", true)
			r.fr.WriteRSTStream(next, http2.ErrCodeCancel)
			next += 2
		}
		r.request(next, "GET", "/about", true)
		var body []byte
		for done := false; !done; {
			f, err := r.fr.ReadFrame()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				t.Fatalf("round %d: GOAWAY %v after %d resets", round, f.ErrCode, h2MaxStreams)
			case *http2.DataFrame:
				if f.StreamID == next {
					body = append(body, f.Data()...)
					done = f.StreamEnded()
				}
			}
		}
		if string(body) != "<p>about</p>" {
			t.Fatalf("round %d: after %d resets: %q", round, h2MaxStreams, body)
		}
		next += 2
	}
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *bytesBuffer) Reset()                      { w.b = w.b[:0] }

func isConnReset(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && !ne.Timeout()
}
