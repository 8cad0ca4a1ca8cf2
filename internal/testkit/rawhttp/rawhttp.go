// Package rawhttp reads HTTP/1.1 answers off a raw connection for the
// tests that hold a fast path to net/http's answers byte for byte: what a
// client can tell of each answer, and whether the connection ends.
package rawhttp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// FixedDate is a Date header a test's server may set on purpose; Read
// keeps it, and drops any other Date, which follows the clock.
const FixedDate = "Mon, 02 Jan 2006 15:04:05 GMT"

// Answer is everything a client can tell of an answer: trailers are in
// Header as Trailer-Name, and Err says how reading it failed.
type Answer struct {
	Status int
	Header http.Header
	TE     []string
	Length int64
	Body   string
	Err    string
}

// String is the answer in a stable form, headers sorted, for comparing
// two answers and showing how they differ.
func (a Answer) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d te=%q length=%d err=%q\n", a.Status, a.TE, a.Length, a.Err)
	for _, k := range slices.Sorted(func(y func(string) bool) {
		for k := range a.Header {
			if !y(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "%s: %q\n", k, a.Header[k])
	}
	fmt.Fprintf(&b, "body %q", a.Body)
	return b.String()
}

// Read reads an answer on c for each of heads (true for an answer to a
// HEAD), stopping at the first that fails, and then whether the
// connection ends.
func Read(c net.Conn, heads ...bool) (out []Answer, closed bool) {
	br := bufio.NewReader(c)
	for _, head := range heads {
		method := "GET"
		if head {
			method = "HEAD"
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return append(out, Answer{Err: "head: " + err.Error()}), true
		}
		a := Answer{Status: resp.StatusCode, Header: resp.Header, TE: resp.TransferEncoding, Length: resp.ContentLength}
		body, err := io.ReadAll(resp.Body)
		a.Body = string(body)
		if err != nil {
			a.Err = "body: " + err.Error()
		}
		for k, v := range resp.Trailer {
			a.Header["Trailer-"+k] = v
		}
		if a.Header.Get("Date") != FixedDate {
			a.Header.Del("Date")
		}
		out = append(out, a)
		if a.Err != "" {
			return out, true
		}
	}
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := br.ReadByte()
	return out, err == io.EOF || errors.Is(err, net.ErrClosed)
}
