package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"strings"
	"sync/atomic"
	"testing"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// BenchmarkSMTPAccept is messages accepted per second over SMTP: Pier's
// listener (parsing, DKIM/SPF/DMARC checks, storing the message) against a
// plain go-smtp server that discards, in the same run. Each of 8 senders
// keeps one connection and sends MAIL, RCPT, DATA in a loop. Read the
// ratio pier/discard of msgs/s.
func BenchmarkSMTPAccept(b *testing.B) {
	msg := []byte("From: sender@example.org\r\nTo: agent@DOMAIN\r\nSubject: benchmark\r\n\r\n" + strings.Repeat("A line of a small message body.\r\n", 30))
	b.Run("discard", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		s := gosmtp.NewServer(discard{})
		s.Domain = "discard.test"
		go s.Serve(ln)
		b.Cleanup(func() { s.Close() })
		sendLoop(b, ln.Addr().String(), "agent@discard.test", msg)
	})
	b.Run("pier", func(b *testing.B) {
		ts := testserver.Start(b, server.Config{SMTPPeerRate: 1e9, InboxBytes: 1 << 40})
		rcpt := mailAddress(b, ts)
		// Every sender here is one address: the per-peer rate limit is
		// lifted, since it is not what this measures.
		sendLoop(b, ts.SMTPAddr(), rcpt, bytes.ReplaceAll(msg, []byte("DOMAIN"), []byte(rcpt[strings.Index(rcpt, "@")+1:])))
	})
}

type discard struct{}

func (discard) NewSession(*gosmtp.Conn) (gosmtp.Session, error) { return discardSession{}, nil }

type discardSession struct{}

func (discardSession) Reset()                                 {}
func (discardSession) Logout() error                          { return nil }
func (discardSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (discardSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (discardSession) Data(r io.Reader) error                 { _, err := io.Copy(io.Discard, r); return err }

func sendLoop(b *testing.B, addr, rcpt string, msg []byte) {
	b.SetParallelism(4) // 8 senders on 2 cores
	var sent atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := smtp.Dial(addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		c.Hello("bench.test")
		for pb.Next() {
			if err := c.Mail("sender@example.org"); err != nil {
				b.Error(err)
				return
			}
			if err := c.Rcpt(rcpt); err != nil {
				b.Error(err)
				return
			}
			w, err := c.Data()
			if err != nil {
				b.Error(err)
				return
			}
			w.Write(msg)
			if err := w.Close(); err != nil {
				b.Error(err)
				return
			}
			sent.Add(1)
		}
	})
	b.ReportMetric(float64(sent.Load())/b.Elapsed().Seconds(), "msgs/s")
}

// mailAddress buys a domain, sets its mail up and makes an address, through
// the API, with a peer rate limit high enough not to be measured.
func mailAddress(b *testing.B, ts *testserver.Server) string {
	key := ts.Key(b, "read", "quote", "launch", "buy_domain")
	call := func(method, path string, body any) map[string]any {
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		}
		req, _ := http.NewRequest(method, ts.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		var env map[string]any
		json.NewDecoder(res.Body).Decode(&env)
		if res.StatusCode >= 300 {
			b.Fatalf("%s %s: %d %v", method, path, res.StatusCode, env)
		}
		return env["data"].(map[string]any)
	}
	wait := func(task string) {
		for range 1000 {
			if call("GET", "/v1/tasks/"+task, nil)["state"] == "succeeded" {
				return
			}
		}
		b.Fatalf("task %s did not finish", task)
	}
	proj := call("GET", "/v1/projects", nil)["projects"].([]any)[0].(map[string]any)["id"].(string)
	domain := ""
	for i := 0; domain == ""; i++ {
		d := fmt.Sprintf("smtpbench%d.dev", i)
		for _, c := range call("GET", "/v1/domains/search?q="+d[:len(d)-4]+"&tldAllowlist=dev", nil)["candidates"].([]any) {
			if c := c.(map[string]any); c["domain"] == d && c["available"] == true {
				domain = d
			}
		}
	}
	bundle := call("POST", "/v1/bundles", map[string]any{"projectId": proj, "files": []any{map[string]any{"path": "index.html", "contentBase64": "aGk="}}})["bundleId"]
	q := call("POST", "/v1/quotes", map[string]any{"projectId": proj, "items": []any{map[string]any{"kind": "domain", "domain": domain}}})["quoteId"]
	wait(call("POST", "/v1/projects/"+proj+"/launch", map[string]any{"name": "www", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": q})["taskId"].(string))
	mq := call("POST", "/v1/quotes", map[string]any{"projectId": proj, "items": []any{map[string]any{"kind": "email", "domain": domain}}})["quoteId"]
	wait(call("POST", "/v1/domains/"+domain+"/email", map[string]any{"quoteId": mq})["taskId"].(string))
	call("POST", "/v1/email-addresses", map[string]any{"address": "agent@" + domain})
	return "agent@" + domain
}
