package server_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	gosmtp "github.com/emersion/go-smtp"
	"github.com/miekg/dns"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// mailDomain buys a domain with a launch, sets its mail up and makes
// agent@ it; it returns the domain and the inbox id.
func mailDomain(t *testing.T, ts *testServer, a account, prefix string) (string, string) {
	t.Helper()
	c := ts.Client
	domain := availableDomains(1, "dev", prefix)[0]
	bundle := upload(t, ts, a, siteSaying("mail"))
	quote := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
	r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "www", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": quote}, a.header())
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")

	q := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "email", "domain": domain}}}, a.header())
	if q.StatusCode != 201 {
		t.Fatalf("mail quote: %d %s", q.StatusCode, q.Body)
	}
	r = c.Do("POST", "/v1/domains/"+domain+"/email", map[string]any{"quoteId": q.JSON()["data"].(map[string]any)["quoteId"]}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("setup_email: %d %s", r.StatusCode, r.Body)
	}
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	r = c.Do("POST", "/v1/email-addresses", map[string]any{"address": "agent@" + domain}, a.header())
	if r.StatusCode != 201 {
		t.Fatalf("create address: %d %s", r.StatusCode, r.Body)
	}
	return domain, r.JSON()["data"].(map[string]any)["inboxId"].(string)
}

func dnsAnswer(t *testing.T, ts *testServer, name string, typ uint16) []dns.RR {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), typ)
	in, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, ts.DNSAddr())
	if err != nil {
		t.Fatal(err)
	}
	return in.Answer
}

func txt(rrs []dns.RR) string {
	var out []string
	for _, rr := range rrs {
		if t, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(t.Txt, ""))
		}
	}
	return strings.Join(out, "|")
}

// sendSMTP speaks SMTP with net/smtp's client, without STARTTLS, as an
// MTA that does not insist on TLS would.
func sendSMTP(addr, from string, to []string, msg string) error {
	return sendRaw(addr, from, to, []byte(strings.ReplaceAll(msg, "\n", "\r\n")))
}

func sendRaw(addr, from string, to []string, msg []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("sender.test"); err != nil {
		return err
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, t := range to {
		if err := c.Rcpt(t); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

func TestMailSetupAndInbound(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db, SMTPMaxMessageBytes: 64 << 10})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain, inbox := mailDomain(t, ts, a, "mailin")

		mailRecordsInTheZone(t, ts, domain)

		smtpAddr := ts.SMTPAddr()
		// Delivery to an address that exists; 550 for one that does not,
		// and for a domain that is not ours: no relaying.
		if err := sendSMTP(smtpAddr, "sender@example.org", []string{"agent@" + domain}, "From: sender@example.org\nTo: agent@"+domain+"\nSubject: hello there\n\nYour code is 123456.\n"); err != nil {
			t.Fatal(err)
		}
		for _, rcpt := range []string{"nobody@" + domain, "someone@example.com"} {
			err := sendSMTP(smtpAddr, "sender@example.org", []string{rcpt}, "Subject: x\n\nx\n")
			if err == nil || !strings.Contains(err.Error(), "550") {
				t.Fatalf("%s accepted: %v", rcpt, err)
			}
		}
		// The size limit.
		big := "Subject: big\n\n" + strings.Repeat(strings.Repeat("x", 99)+"\n", 720)
		if err := sendSMTP(smtpAddr, "sender@example.org", []string{"agent@" + domain}, big); err == nil || !strings.Contains(err.Error(), "552") {
			t.Fatalf("oversized message: %v", err)
		}

		sendDKIMSigned(t, ts, domain)
		startTLSWithTheEdgesCertificate(t, ts, domain)

		c := ts.Client
		list := c.Do("GET", "/v1/inboxes/"+inbox+"/messages", nil, a.header()).JSON()["data"].(map[string]any)["messages"].([]any)
		if len(list) != 2 || list[0].(map[string]any)["subject"] != "signed" {
			t.Fatalf("messages: %v", list)
		}
		got := c.Do("GET", "/v1/messages/"+list[0].(map[string]any)["id"].(string), nil, a.header()).JSON()["data"].(map[string]any)
		if auth := got["auth"].(map[string]any); auth["dkim"] != "pass" || auth["dkimDomain"] != domain || auth["dmarc"] != "pass" {
			t.Fatalf("auth results: %v", auth)
		}
		plain := c.Do("GET", "/v1/messages/"+list[1].(map[string]any)["id"].(string), nil, a.header()).JSON()["data"].(map[string]any)
		if !strings.Contains(plain["text"].(string), "123456") || plain["auth"].(map[string]any)["dkim"] != "none" {
			t.Fatalf("plain message: %v", plain)
		}
		// Filters.
		l := c.Do("GET", "/v1/inboxes/"+inbox+"/messages?subject=hello", nil, a.header()).JSON()["data"].(map[string]any)["messages"].([]any)
		if len(l) != 1 {
			t.Fatalf("subject filter: %v", l)
		}
		// Another organisation sees none of it.
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		if r := c.Do("GET", "/v1/inboxes/"+inbox+"/messages", nil, b.header()); r.StatusCode != 404 || !namesTool(r.JSON(), "list_inboxes") {
			t.Fatalf("another organisation read the inbox: %d", r.StatusCode)
		}
	})
}

// The zone answers MX, SPF, DMARC and DKIM over real DNS.
func mailRecordsInTheZone(t *testing.T, ts *testServer, domain string) {
	t.Helper()
	if mx := dnsAnswer(t, ts, domain, dns.TypeMX); len(mx) != 1 || mx[0].(*dns.MX).Mx != "mail."+domain+"." {
		t.Fatalf("MX: %v", mx)
	}
	if s := txt(dnsAnswer(t, ts, domain, dns.TypeTXT)); !strings.Contains(s, "v=spf1") {
		t.Fatalf("SPF: %q", s)
	}
	if s := txt(dnsAnswer(t, ts, "_dmarc."+domain, dns.TypeTXT)); !strings.HasPrefix(s, "v=DMARC1") {
		t.Fatalf("DMARC: %q", s)
	}
	dkimTXT := txt(dnsAnswer(t, ts, service.DKIMSelector+"._domainkey."+domain, dns.TypeTXT))
	if !strings.HasPrefix(dkimTXT, "v=DKIM1; k=ed25519; p=") {
		t.Fatalf("DKIM: %q", dkimTXT)
	}
	if a := dnsAnswer(t, ts, "mail."+domain, dns.TypeA); len(a) != 1 {
		t.Fatalf("mail host: %v", a)
	}
}

// A message signed with the domain's own stored key verifies, against the
// key published in its zone.
func sendDKIMSigned(t *testing.T, ts *testServer, domain string) {
	t.Helper()
	smtpAddr := ts.SMTPAddr()
	md, err := ts.Store().Mail().Domain(context.Background(), domain)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(md.PrivateKey))
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var signed bytes.Buffer
	raw := "From: agent@" + domain + "\r\nTo: agent@" + domain + "\r\nSubject: signed\r\nDate: " + time.Now().Format(time.RFC1123Z) + "\r\n\r\nSigned body.\r\n"
	if err := dkim.Sign(&signed, strings.NewReader(raw), &dkim.SignOptions{Domain: domain, Selector: service.DKIMSelector, Signer: key.(crypto.Signer)}); err != nil {
		t.Fatal(err)
	}
	if err := sendRaw(smtpAddr, "agent@"+domain, []string{"agent@" + domain}, signed.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// STARTTLS with the edge's certificate for the mail host.
func startTLSWithTheEdgesCertificate(t *testing.T, ts *testServer, domain string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ts.CARootPEM())
	cl, err := smtp.Dial(ts.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := cl.Extension("STARTTLS"); !ok {
		t.Fatal("no STARTTLS offered")
	}
	if err := cl.StartTLS(&tls.Config{ServerName: "mail." + domain, RootCAs: pool}); err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	if state, ok := cl.TLSConnectionState(); !ok || !state.HandshakeComplete {
		t.Fatal("no TLS after STARTTLS")
	}
	cl.Quit()
}

func TestWaitForMessageWakesOnArrival(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain, inbox := mailDomain(t, ts, a, "mailwait")

	type result struct {
		status int
		body   string
		at     time.Time
	}
	done := make(chan result, 1)
	go func() {
		r := ts.Client.Do("POST", "/v1/inboxes/"+inbox+"/wait", map[string]any{"subject": "verify", "timeoutSeconds": 20}, a.header())
		done <- result{r.StatusCode, string(r.Body), time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := sendSMTP(ts.SMTPAddr(), "noreply@service.example", []string{"agent@" + domain}, "Subject: Please verify your account\n\nCode: 998877\n"); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	select {
	case r := <-done:
		if r.status != 200 || !strings.Contains(r.body, "998877") {
			t.Fatalf("wait: %d %s", r.status, r.body)
		}
		if d := r.at.Sub(sent); d > time.Second {
			t.Fatalf("wait answered %s after the message arrived", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wait_for_message never answered")
	}
	r := ts.Client.Do("POST", "/v1/inboxes/"+inbox+"/wait", map[string]any{"subject": "never", "timeoutSeconds": 1}, a.header())
	if r.StatusCode != 404 || r.JSON()["blockedBy"] != "mail:no_message" {
		t.Fatalf("timeout: %d %s", r.StatusCode, r.Body)
	}

	// With two matches, the oldest at or after `since` answers.
	between := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	if err := sendSMTP(ts.SMTPAddr(), "noreply@service.example", []string{"agent@" + domain}, "Subject: Please verify your account\n\nCode: 112233\n"); err != nil {
		t.Fatal(err)
	}
	if err := sendSMTP(ts.SMTPAddr(), "noreply@service.example", []string{"agent@" + domain}, "Subject: Please verify your account\n\nCode: 445566\n"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		since map[string]any
		want  string
	}{
		{map[string]any{}, "998877"},
		{map[string]any{"since": between.Format(time.RFC3339Nano)}, "112233"},
	} {
		args := map[string]any{"subject": "verify", "timeoutSeconds": 2}
		for k, v := range c.since {
			args[k] = v
		}
		r := ts.Client.Do("POST", "/v1/inboxes/"+inbox+"/wait", args, a.header())
		if r.StatusCode != 200 || !strings.Contains(string(r.Body), c.want) {
			t.Fatalf("wait %v: want %s, got %d %s", c.since, c.want, r.StatusCode, r.Body)
		}
	}
}

// relaySink is a second SMTP server standing for the smarthost.
type relaySink struct {
	mu   sync.Mutex
	msgs [][]byte
}

func (r *relaySink) NewSession(*gosmtp.Conn) (gosmtp.Session, error) { return &sinkSession{r: r}, nil }

type sinkSession struct{ r *relaySink }

func (s *sinkSession) Reset()                                 {}
func (s *sinkSession) Logout() error                          { return nil }
func (s *sinkSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (s *sinkSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (s *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.r.mu.Lock()
	s.r.msgs = append(s.r.msgs, b)
	s.r.mu.Unlock()
	return err
}

func TestSendThroughTheRelaySignsWithDKIM(t *testing.T) {
	sink := &relaySink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	relay := gosmtp.NewServer(sink)
	relay.Domain = "relay.test"
	go relay.Serve(ln)
	t.Cleanup(func() { relay.Close() })

	ts := start(t, server.Config{SMTPRelay: "smtp://" + ln.Addr().String()})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain, _ := mailDomain(t, ts, a, "mailout")
	r := ts.Client.Do("POST", "/v1/messages", map[string]any{"from": "agent@" + domain, "to": []any{"person@example.org"}, "subject": "Hello", "text": "From Pier."}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("send: %d %s", r.StatusCode, r.Body)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.msgs) != 1 {
		t.Fatalf("the relay got %d messages", len(sink.msgs))
	}
	// Verified on arrival against the key Pier's DNS publishes.
	lookup := func(name string) ([]string, error) {
		return []string{txt(dnsAnswer(t, ts, name, dns.TypeTXT))}, nil
	}
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(sink.msgs[0]), &dkim.VerifyOptions{LookupTXT: lookup})
	if err != nil || len(vs) != 1 || vs[0].Err != nil || vs[0].Domain != domain {
		t.Fatalf("DKIM on arrival: %v %+v", err, vs)
	}

	// Without a relay, sending is refused with the setting to change.
	plain := start(t, server.Config{})
	b := newAccount(t, plain, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	r = plain.Client.Do("POST", "/v1/messages", map[string]any{"from": "agent@x.dev", "to": []any{"person@example.org"}, "subject": "Hello", "text": "x"}, b.header())
	if r.StatusCode != 503 || r.JSON()["blockedBy"] != "mail:relay_unconfigured" || !strings.Contains(r.JSON()["message"].(string), "--smtp-relay") {
		t.Fatalf("no relay: %d %s", r.StatusCode, r.Body)
	}
}

var confirmLink = regexp.MustCompile(`https?://\S+/registrant/confirm/[0-9a-f]+`)

// TestRegistrantConfirmedByThePerson: an address outside Pier, which no
// agent key can read, gets a link; the person confirms from it, and the
// ledger names that address as the actor.
func TestRegistrantConfirmedByThePerson(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		sink, relay := startRelay(t)
		ts := start(t, server.Config{DatabaseURL: db, SMTPRelay: relay})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain, _ := mailDomain(t, ts, a, "mailreg")
		c := ts.Client
		r := c.Do("PUT", "/v1/domains/"+domain+"/registrant-contact", map[string]any{"name": "Ada Lovelace", "email": "ada@example.org",
			"street": "12 St James's Square", "city": "London", "postalCode": "SW1Y 4JH", "country": "GB"}, a.header())
		if r.StatusCode != 202 || r.JSON()["data"].(map[string]any)["state"] != "input_required" {
			t.Fatalf("propose: %d %s", r.StatusCode, r.Body)
		}
		data := r.JSON()["data"].(map[string]any)
		task, approval := data["taskId"].(string), data["approvalUrl"].(string)
		link := confirmLink.FindString(sink.all())
		if link == "" {
			t.Fatalf("no link in %q", sink.all())
		}
		// Before confirming, RDAP has no registrant.
		rd := c.Do("GET", "/rdap/domain/"+domain, nil, http.Header{"Accept": {"application/rdap+json"}})
		if rd.StatusCode != 200 || strings.Contains(string(rd.Body), "registrant") {
			t.Fatalf("rdap before: %d %s", rd.StatusCode, rd.Body)
		}
		confirmInBrowserlessForm(t, ts, link)
		waitTask(t, ts, a, task, "succeeded")
		rd = c.Do("GET", "/rdap/domain/"+domain, nil, http.Header{"Accept": {"application/rdap+json"}})
		body := string(rd.Body)
		if rd.StatusCode != 200 || rd.Header.Get("Content-Type") != "application/rdap+json" || !strings.Contains(body, `"registrant"`) || !strings.Contains(body, `"redacted"`) {
			t.Fatalf("rdap after: %d %s", rd.StatusCode, body)
		}
		if strings.Contains(body, "Lovelace") || strings.Contains(body, "ada@") || strings.Contains(body, "James") {
			t.Fatalf("RDAP shows the registrant's personal data: %s", body)
		}
		// The person at the address confirmed; the gate closed with it.
		if actors := ledgerActors(t, ts, a, "confirm_registrant"); len(actors) != 1 || actors[0] != "registrant:ada@example.org" {
			t.Fatalf("confirm_registrant actors: %v", actors)
		}
		if after := signIn(t, ts, a.org).get(approval).body; !strings.Contains(after, "Confirmed: the registrar records Ada Lovelace") {
			t.Fatalf("the approval after the link: %s", after)
		}
		// The leave package carries the registrant record.
		ex := c.Do("POST", "/v1/projects/"+a.project+"/export", nil, a.header())
		if ex.StatusCode != 200 || !strings.Contains(string(ex.Body), "registrants/"+domain+".json") {
			t.Fatalf("leave package: %d %.300s", ex.StatusCode, ex.Body)
		}
	})
}

// confirmInBrowserlessForm opens the confirmation page and presses its
// button as a browser would: the form's token and its cookie.
func confirmInBrowserlessForm(t *testing.T, ts *testServer, link string) {
	t.Helper()
	path := link[strings.Index(link, "/registrant/"):]
	page, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(html)
	if page.StatusCode != 200 || m == nil || !strings.Contains(string(html), "Ada Lovelace") {
		t.Fatalf("confirm page: %d %s", page.StatusCode, html)
	}
	req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader("csrf="+string(m[1])))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range page.Cookies() {
		req.AddCookie(ck)
	}
	req.Header.Set("Origin", ts.URL)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(out), "Confirmed") {
		t.Fatalf("confirm: %d %s", res.StatusCode, out)
	}
	_ = fmt.Sprint()
}

// Two setups racing, each with its own quote: one claims the domain's mail
// and is charged; the other answers the same task and its quote is left.
func TestConcurrentMailSetupChargesOnce(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		c := ts.Client
		domain := availableDomains(1, "dev", "mailrace")[0]
		quote := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "www", "target": "edge", "bundleId": upload(t, ts, a, siteSaying("race")), "domain": domain, "quoteId": quote}, a.header())
		waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")

		var quotes []any
		for range 2 {
			q := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "email", "domain": domain}}}, a.header())
			if q.StatusCode != 201 {
				t.Fatalf("mail quote: %d %s", q.StatusCode, q.Body)
			}
			quotes = append(quotes, q.JSON()["data"].(map[string]any)["quoteId"])
		}
		tasks := make([]string, 2)
		var wg sync.WaitGroup
		for i, q := range quotes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := c.Do("POST", "/v1/domains/"+domain+"/email", map[string]any{"quoteId": q}, a.header())
				if r.StatusCode != 202 {
					t.Errorf("setup_email: %d %s", r.StatusCode, r.Body)
					return
				}
				tasks[i] = r.JSON()["data"].(map[string]any)["taskId"].(string)
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if tasks[0] != tasks[1] {
			t.Fatalf("two setup tasks: %v", tasks)
		}
		waitTask(t, ts, a, tasks[0], "succeeded")
		// The domain (12) and one mail add-on (3); the other quote still holds.
		if spent, held := budget(t, ts, a); spent != 15 || held != 3 {
			t.Fatalf("spent %v held %v", spent, held)
		}

		// Removed, the mail can be set up again with the quote left over,
		// under the same key.
		key := txt(dnsAnswer(t, ts, service.DKIMSelector+"._domainkey."+domain, dns.TypeTXT))
		if r := c.Do("DELETE", "/v1/domains/"+domain+"/email", nil, a.header()); r.StatusCode != 200 {
			t.Fatalf("remove_email: %d %s", r.StatusCode, r.Body)
		}
		spentQuote, leftQuote := quotes[0], quotes[1]
		if c.Do("GET", "/v1/quotes/"+quotes[0].(string), nil, a.header()).JSON()["data"].(map[string]any)["state"] == "held" {
			spentQuote, leftQuote = quotes[1], quotes[0]
		}
		// The consumed quote is refused, with a valid action to quote again.
		r = c.Do("POST", "/v1/domains/"+domain+"/email", map[string]any{"quoteId": spentQuote}, a.header())
		if r.StatusCode != 409 || !strings.Contains(string(r.Body), `"kind":"email"`) {
			t.Fatalf("setup with a consumed quote: %d %s", r.StatusCode, r.Body)
		}
		r = c.Do("POST", "/v1/domains/"+domain+"/email", map[string]any{"quoteId": leftQuote}, a.header())
		again, _ := r.JSON()["data"].(map[string]any)["taskId"].(string)
		if r.StatusCode != 202 || again == tasks[0] {
			t.Fatalf("setup after removal: %d %s", r.StatusCode, r.Body)
		}
		waitTask(t, ts, a, again, "succeeded")
		if k := txt(dnsAnswer(t, ts, service.DKIMSelector+"._domainkey."+domain, dns.TypeTXT)); k != key {
			t.Fatalf("the DKIM key changed: %q, was %q", k, key)
		}
		if spent, held := budget(t, ts, a); spent != 18 || held != 0 {
			t.Fatalf("after setting up again: spent %v held %v", spent, held)
		}
	})
}

// A newer registrant proposal replaces one still waiting: the older link
// confirms nothing and its task ends. A registrant recorded under another
// organisation is not the domain's.
func TestRegistrantProposalsSupersedeAndStayInTheirOrganisation(t *testing.T) {
	sink, relay := startRelay(t)
	ts := start(t, server.Config{SMTPRelay: relay})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain, _ := mailDomain(t, ts, a, "mailsup")
	c := ts.Client
	rdap := func() string {
		return string(c.Do("GET", "/rdap/domain/"+domain, nil, http.Header{"Accept": {"application/rdap+json"}}).Body)
	}

	// Another organisation's confirmed registrant for the name is not the
	// domain's registrant.
	b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	ctx := context.Background()
	if _, err := ts.Store().Mail().ProposeRegistrant(ctx, store.Registrant{Domain: domain, OrgID: b.org, Contact: `{"name":"Mallory","email":"m@example.org","country":"ZZ"}`,
		TokenHash: "other-org", TaskID: "tsk_other", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := ts.Store().Mail().ConfirmRegistrant(ctx, "other-org", time.Now()); err != nil {
		t.Fatal(err)
	}
	if body := rdap(); strings.Contains(body, "registrant") || strings.Contains(body, `"ZZ"`) {
		t.Fatalf("RDAP shows another organisation's registrant: %s", body)
	}
	if ex := c.Do("POST", "/v1/projects/"+a.project+"/export", nil, a.header()); strings.Contains(string(ex.Body), "registrants/"+domain) {
		t.Fatal("the leave package carries another organisation's registrant")
	}

	propose := func(country string) (task, approval, link string) {
		t.Helper()
		r := c.Do("PUT", "/v1/domains/"+domain+"/registrant-contact", map[string]any{"name": "Ada Lovelace", "email": "ada@example.org", "country": country}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("propose: %d %s", r.StatusCode, r.Body)
		}
		links := confirmLink.FindAllString(sink.all(), -1)
		data := r.JSON()["data"].(map[string]any)
		return data["taskId"].(string), data["approvalUrl"].(string), links[len(links)-1]
	}
	firstTask, firstApproval, firstLink := propose("GB")
	secondTask, _, secondLink := propose("FR")
	if firstLink == "" || firstLink == secondLink {
		t.Fatalf("links: %q %q", firstLink, secondLink)
	}
	// The older link no longer confirms: its page says so, and so does
	// its button.
	page, err := http.Get(ts.URL + firstLink[strings.Index(firstLink, "/registrant/"):])
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 409 || !strings.Contains(string(html), "newer proposal") {
		t.Fatalf("superseded link: %d %s", page.StatusCode, html)
	}
	failed := waitTask(t, ts, a, firstTask, "failed")
	if !strings.Contains(fmt.Sprint(failed["result"]), secondTask) {
		t.Fatalf("the superseded task does not name its successor: %v", failed)
	}
	// Nor does its approval: the gate closed with it.
	hb := signIn(t, ts, a.org)
	if p := hb.post(firstApproval, url.Values{"csrf": {csrfOf(t, hb.get("/dashboard"))}, "decision": {"approve"}}); p.status != 409 {
		t.Fatalf("approving the superseded proposal: %d", p.status)
	}
	confirmInBrowserlessForm(t, ts, secondLink)
	waitTask(t, ts, a, secondTask, "succeeded")
	if body := rdap(); !strings.Contains(body, `"cc":"FR"`) {
		t.Fatalf("RDAP after the newer proposal: %s", body)
	}
}
