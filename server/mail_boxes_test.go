package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/smtp"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	gosmtp "github.com/emersion/go-smtp"
	"github.com/miekg/dns"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// A peer that sends faster than its rate is told to come back later (421),
// in the next session too; a rate below one message in two seconds still
// lets the first message through.
func TestSMTPPeerRateLimit(t *testing.T) {
	ts := start(t, server.Config{SMTPPeerRate: 0.1})
	mail := func() error {
		c, err := smtp.Dial(ts.SMTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Hello("sender.test"); err != nil {
			t.Fatal(err)
		}
		return c.Mail("sender@example.org")
	}
	if err := mail(); err != nil {
		t.Fatalf("the first message of a slow peer: %v", err)
	}
	if err := mail(); err == nil || !strings.HasPrefix(err.Error(), "421") {
		t.Fatalf("a second message at once: %v", err)
	}
}

// The recipient cap (452 past 50) and the per-inbox storage cap (552 once
// full); deleting a message gives its bytes back, as list_inboxes shows.
func TestSMTPRecipientAndInboxCaps(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db, InboxBytes: 4000})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain, inbox := mailDomain(t, ts, a, "mailcap")
		rcpt := "agent@" + domain

		fiftyRecipientsAtMost(t, ts.SMTPAddr(), rcpt)

		// Three messages of 1,500 bytes against 4,000: the third does not fit.
		msg := fillerMessage
		// The first names its recipient twice: one copy (a second would
		// leave no room for the second message).
		for n := 1; n <= 2; n++ {
			to := []string{rcpt}
			if n == 1 {
				to = append(to, rcpt)
			}
			if err := sendSMTP(ts.SMTPAddr(), "sender@example.org", to, msg(n)); err != nil {
				t.Fatalf("message %d: %v", n, err)
			}
		}
		if err := sendSMTP(ts.SMTPAddr(), "sender@example.org", []string{rcpt}, msg(3)); err == nil || !strings.HasPrefix(err.Error(), "552") {
			t.Fatalf("a message past the inbox's limit: %v", err)
		}

		c := ts.Client
		inboxOf := func() map[string]any { return inboxNamed(t, ts, a, inbox) }
		full := inboxOf()
		used := full["bytesUsed"].(float64)
		if full["address"] != rcpt || full["messages"] != 2.0 || full["bytesLimit"] != 4000.0 || used < 2800 || used > 4000 {
			t.Fatalf("the full inbox: %v", full)
		}

		list := c.Do("GET", "/v1/inboxes/"+inbox+"/messages", nil, a.header()).JSON()["data"].(map[string]any)["messages"].([]any)
		id := list[0].(map[string]any)["id"].(string)
		size := list[0].(map[string]any)["size"].(float64)
		r := c.Do("DELETE", "/v1/messages/"+id, nil, a.header())
		if d := r.JSON()["data"].(map[string]any); r.StatusCode != 200 || d["deleted"] != true || d["id"] != id {
			t.Fatalf("delete_message: %d %s", r.StatusCode, r.Body)
		}
		if r := c.Do("GET", "/v1/messages/"+id, nil, a.header()); r.StatusCode != 404 || !namesTool(r.JSON(), "list_inboxes") {
			t.Fatalf("a deleted message reads: %d %s", r.StatusCode, r.Body)
		}
		if r := c.Do("DELETE", "/v1/messages/"+id, nil, a.header()); r.StatusCode != 404 {
			t.Fatalf("deleting it again: %d %s", r.StatusCode, r.Body)
		}
		// Another organisation cannot delete one.
		other := list[1].(map[string]any)["id"].(string)
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		if r := c.Do("DELETE", "/v1/messages/"+other, nil, b.header()); r.StatusCode != 404 || !namesTool(r.JSON(), "list_inboxes") {
			t.Fatalf("another organisation deleted a message: %d %s", r.StatusCode, r.Body)
		}
		if after := inboxOf(); after["messages"] != 1.0 || after["bytesUsed"].(float64) != used-size {
			t.Fatalf("after delete_message: %v (was %v bytes, freed %v)", after, used, size)
		}
		// There is room again.
		if err := sendSMTP(ts.SMTPAddr(), "sender@example.org", []string{rcpt}, msg(3)); err != nil {
			t.Fatalf("after freeing room: %v", err)
		}
	})
}

// fiftyRecipientsAtMost wants one SMTP transaction to take 50
// recipients and refuse the 51st with 452.
func fiftyRecipientsAtMost(t *testing.T, addr, rcpt string) {
	t.Helper()
	cl, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Hello("sender.test"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Mail("sender@example.org"); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := cl.Rcpt(rcpt); err != nil {
			t.Fatalf("recipient %d: %v", i+1, err)
		}
	}
	if err := cl.Rcpt(rcpt); err == nil || !strings.HasPrefix(err.Error(), "452") {
		t.Fatalf("the 51st recipient: %v", err)
	}
	cl.Reset()
	cl.Quit()
}

// fillerMessage is message n, of about 1,500 bytes.
func fillerMessage(n int) string {
	return fmt.Sprintf("From: sender@example.org\nSubject: filler %d\n\n%s\n", n, strings.Repeat(strings.Repeat("y", 74)+"\n", 19))
}

// inboxNamed answers the inbox of list_inboxes whose id is inbox.
func inboxNamed(t *testing.T, ts *testServer, a account, inbox string) map[string]any {
	t.Helper()
	t.Helper()
	r := ts.Client.Do("GET", "/v1/inboxes", nil, a.header())
	if r.StatusCode != 200 {
		t.Fatalf("list_inboxes: %d %s", r.StatusCode, r.Body)
	}
	for _, i := range r.JSON()["data"].(map[string]any)["inboxes"].([]any) {
		if i := i.(map[string]any); i["id"] == inbox {
			return i
		}
	}
	t.Fatalf("list_inboxes has no %s: %s", inbox, r.Body)
	return nil
}

// Attachments are kept as blobs by their SHA-256: get_message names them,
// and the same file in two messages is stored once.
func TestMailAttachmentsAreContentAddressed(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain, inbox := mailDomain(t, ts, a, "mailatt")

	file := bytes.Repeat([]byte("%PDF-1.4 pier attachment\x00\x01\x02"), 40)
	sum := sha256.Sum256(file)
	sha := hex.EncodeToString(sum[:])
	b64 := base64.StdEncoding.EncodeToString(file)
	var wrapped strings.Builder
	for len(b64) > 76 {
		wrapped.WriteString(b64[:76] + "\n")
		b64 = b64[76:]
	}
	wrapped.WriteString(b64 + "\n")
	for _, subject := range []string{"invoice one", "invoice two"} {
		msg := "From: billing@example.org\nTo: agent@" + domain + "\nSubject: " + subject + "\nMIME-Version: 1.0\n" +
			"Content-Type: multipart/mixed; boundary=outer\n\n" +
			"--outer\nContent-Type: multipart/alternative; boundary=inner\n\n" +
			"--inner\nContent-Type: text/plain; charset=utf-8\n\nThe invoice is attached.\n" +
			"--inner\nContent-Type: text/html; charset=utf-8\n\n<p>The invoice is <b>attached</b>.</p>\n" +
			"--inner--\n" +
			"--outer\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=\"invoice.pdf\"\nContent-Transfer-Encoding: base64\n\n" +
			wrapped.String() + "--outer--\n"
		if err := sendSMTP(ts.SMTPAddr(), "billing@example.org", []string{"agent@" + domain}, msg); err != nil {
			t.Fatal(err)
		}
	}
	c := ts.Client
	list := c.Do("GET", "/v1/inboxes/"+inbox+"/messages", nil, a.header()).JSON()["data"].(map[string]any)["messages"].([]any)
	if len(list) != 2 {
		t.Fatalf("messages: %v", list)
	}
	for _, m := range list {
		got := c.Do("GET", "/v1/messages/"+m.(map[string]any)["id"].(string), nil, a.header()).JSON()["data"].(map[string]any)
		atts := got["attachments"].([]any)
		if len(atts) != 1 {
			t.Fatalf("attachments: %v", got)
		}
		at := atts[0].(map[string]any)
		if at["filename"] != "invoice.pdf" || at["contentType"] != "application/pdf" || at["size"] != float64(len(file)) || at["sha256"] != sha {
			t.Fatalf("attachment: %v, want sha256 %s and %d bytes", at, sha, len(file))
		}
		if !strings.Contains(got["text"].(string), "The invoice is attached.") || !strings.Contains(fmt.Sprint(got["html"]), "<b>attached</b>") {
			t.Fatalf("parts: text %q html %v", got["text"], got["html"])
		}
	}
	blob, err := ts.Store().Bundles().Blob(context.Background(), sha)
	if err != nil || !bytes.Equal(blob, file) {
		t.Fatalf("the blob under %s: %v (%d bytes)", sha, err, len(blob))
	}
	var n int
	if err := ts.Store().DB().QueryRow(`SELECT COUNT(*) FROM blobs WHERE sha256 = '` + sha + `'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the attachment is stored %d times: %v", n, err)
	}
}

// Addresses: create is idempotent under an Idempotency-Key; a deleted
// address takes no more mail (550); a catch-all takes what no address of
// its own does; a domain whose mail is not ready takes neither addresses
// nor mail, and the refusal's next step is a valid call.
func TestMailAddresses(t *testing.T) {
	ts := start(t, server.Config{})
	m := &mailAddresses{t: t, ts: ts, a: newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")}
	m.domain, m.agentInbox = mailDomain(t, ts, m.a, "mailaddr")
	m.support = m.idempotentCreate()
	m.deletedAddressRefusesMail()
	m.catchAllTakesUnknownLocalParts()
	m.domainWithoutMailOffersAQuote()
	m.noAddressesNorMailWhileSettingUp()
}

// mailAddresses is an account whose domain has mail set up, with agent@
// delivering to agentInbox.
type mailAddresses struct {
	t                  *testing.T
	ts                 *testServer
	a                  account
	domain, agentInbox string
	// support is the support@ address the first step creates.
	support map[string]any
}

func (m *mailAddresses) send(rcpt, subject string) error {
	return sendSMTP(m.ts.SMTPAddr(), "sender@example.org", []string{rcpt}, "From: sender@example.org\nSubject: "+subject+"\n\nhello\n")
}

// refused wants mail to rcpt refused with 550.
func (m *mailAddresses) refused(rcpt string) {
	m.t.Helper()
	if err := m.send(rcpt, "x"); err == nil || !strings.HasPrefix(err.Error(), "550") {
		m.t.Fatalf("mail to %s: %v, want 550", rcpt, err)
	}
}

func (m *mailAddresses) addresses() []any {
	return m.ts.Client.Do("GET", "/v1/email-addresses", nil, m.a.header()).JSON()["data"].(map[string]any)["addresses"].([]any)
}

// subjects answers the subjects of inbox's messages, joined with commas.
func (m *mailAddresses) subjects(inbox string) string {
	var out []string
	for _, msg := range m.ts.Client.Do("GET", "/v1/inboxes/"+inbox+"/messages", nil, m.a.header()).JSON()["data"].(map[string]any)["messages"].([]any) {
		out = append(out, msg.(map[string]any)["subject"].(string))
	}
	return strings.Join(out, ",")
}

// The same key twice: the same answer, one address; without the key,
// the address is taken. It answers the address.
func (m *mailAddresses) idempotentCreate() map[string]any {
	t, a, c, domain := m.t, m.a, m.ts.Client, m.domain
	t.Helper()
	h := a.header()
	h.Set("Idempotency-Key", "create-support-1")
	first := c.Do("POST", "/v1/email-addresses", map[string]any{"address": "support@" + domain}, h)
	again := c.Do("POST", "/v1/email-addresses", map[string]any{"address": "support@" + domain}, h)
	if first.StatusCode != 201 || again.StatusCode != 201 || again.JSON()["replayed"] != true ||
		fmt.Sprint(first.JSON()["data"]) != fmt.Sprint(again.JSON()["data"]) {
		t.Fatalf("create twice under one key: %d %s / %d %s", first.StatusCode, first.Body, again.StatusCode, again.Body)
	}
	support := first.JSON()["data"].(map[string]any)
	if l := m.addresses(); len(l) != 2 {
		t.Fatalf("addresses after an idempotent create: %v", l)
	}
	// Without the key, the address is taken.
	if r := c.Do("POST", "/v1/email-addresses", map[string]any{"address": "support@" + domain}, a.header()); r.StatusCode != 409 {
		t.Fatalf("a second create without the key: %d %s", r.StatusCode, r.Body)
	}
	if err := m.send("support@"+domain, "to support"); err != nil {
		t.Fatal(err)
	}
	return support
}

// Deleted, an address refuses mail; its inbox and message stay.
func (m *mailAddresses) deletedAddressRefusesMail() {
	t, a, c, domain := m.t, m.a, m.ts.Client, m.domain
	t.Helper()
	r := c.Do("DELETE", "/v1/email-addresses/"+m.support["id"].(string), nil, a.header())
	if r.StatusCode != 200 || r.JSON()["data"].(map[string]any)["deleted"] != true {
		t.Fatalf("delete_email_address: %d %s", r.StatusCode, r.Body)
	}
	m.refused("support@" + domain)
	// An address the organisation never had is not found, and leads to
	// its addresses.
	if r := c.Do("DELETE", "/v1/email-addresses/adr_neverexisted0000000", nil, a.header()); r.StatusCode != 404 || !namesTool(r.JSON(), "list_email_addresses") {
		t.Fatalf("delete_email_address of an unknown id: %d %s", r.StatusCode, r.Body)
	}
	if l := m.addresses(); len(l) != 1 {
		t.Fatalf("addresses after delete: %v", l)
	}
	if l := c.Do("GET", "/v1/inboxes/"+m.support["inboxId"].(string)+"/messages", nil, a.header()).JSON()["data"].(map[string]any)["messages"].([]any); len(l) != 1 {
		t.Fatalf("the deleted address's inbox: %v", l)
	}
}

// A catch-all, asked for, takes unknown local parts; agent@ keeps its
// own. The catch-all deleted, unknown local parts are refused again.
func (m *mailAddresses) catchAllTakesUnknownLocalParts() {
	t, a, c, domain := m.t, m.a, m.ts.Client, m.domain
	t.Helper()
	m.refused("random@" + domain)
	r := c.Do("POST", "/v1/email-addresses", map[string]any{"address": "any@" + domain, "catchAll": true}, a.header())
	if r.StatusCode != 201 {
		t.Fatalf("catch-all: %d %s", r.StatusCode, r.Body)
	}
	catchAll := r.JSON()["data"].(map[string]any)
	if catchAll["address"] != "*@"+domain || catchAll["catchAll"] != true {
		t.Fatalf("catch-all: %v", catchAll)
	}
	if err := m.send("random@"+domain, "to random"); err != nil {
		t.Fatal(err)
	}
	if err := m.send("agent@"+domain, "to agent"); err != nil {
		t.Fatal(err)
	}
	if s := m.subjects(catchAll["inboxId"].(string)); s != "to random" {
		t.Fatalf("the catch-all's inbox: %q", s)
	}
	if s := m.subjects(m.agentInbox); s != "to agent" {
		t.Fatalf("agent's inbox: %q", s)
	}
	// The catch-all deleted, unknown local parts are refused again.
	c.Do("DELETE", "/v1/email-addresses/"+catchAll["id"].(string), nil, a.header())
	m.refused("random@" + domain)
}

// A domain without mail: the refusal offers a quote in the caller's
// project (the contract client checks the action is a valid call).
func (m *mailAddresses) domainWithoutMailOffersAQuote() {
	t, a, c := m.t, m.a, m.ts.Client
	t.Helper()
	other := availableDomains(1, "dev", "mailnone")[0]
	r := c.Do("POST", "/v1/email-addresses", map[string]any{"address": "agent@" + other}, a.header())
	if r.StatusCode < 400 || r.JSON()["blockedBy"] != "mail:not_set_up" || !strings.Contains(string(r.Body), `"projectId":"`+a.project+`"`) {
		t.Fatalf("an address on a domain without mail: %d %s", r.StatusCode, r.Body)
	}
}

// While the domain's mail is being set up, neither addresses nor mail.
func (m *mailAddresses) noAddressesNorMailWhileSettingUp() {
	t, ts, a, c, domain := m.t, m.ts, m.a, m.ts.Client, m.domain
	t.Helper()
	ctx := context.Background()
	md, err := ts.Store().Mail().Domain(ctx, domain)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Store().Mail().SetDomainState(ctx, domain, "setting_up", md.TaskID, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := c.Do("POST", "/v1/email-addresses", map[string]any{"address": "later@" + domain}, a.header())
	if r.StatusCode < 400 || r.JSON()["blockedBy"] != "mail:not_set_up" || !strings.Contains(string(r.Body), `"get_task"`) {
		t.Fatalf("an address while mail is set up: %d %s", r.StatusCode, r.Body)
	}
	m.refused("agent@" + domain)
	if err := ts.Store().Mail().SetDomainState(ctx, domain, "ready", md.TaskID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := m.send("agent@"+domain, "ready again"); err != nil {
		t.Fatal(err)
	}
}

// list_messages: newest first, in pages that nextBefore links, and
// filtered by sender and by time.
func TestListMessagesPagesAndFilters(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain, inbox := mailDomain(t, ts, a, "mailpage")
	senders := []string{"alice@one.example", "bob@two.example", "alice@one.example", "carol@three.example", "bob@two.example"}
	var between time.Time
	for i, from := range senders {
		if i == 3 {
			time.Sleep(20 * time.Millisecond)
			between = time.Now().UTC()
			time.Sleep(20 * time.Millisecond)
		}
		if err := sendSMTP(ts.SMTPAddr(), from, []string{"agent@" + domain}, fmt.Sprintf("From: %s\nSubject: number %d\n\nbody %d\n", from, i, i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := ts.Client
	list := func(query string) ([]string, string) {
		t.Helper()
		r := c.Do("GET", "/v1/inboxes/"+inbox+"/messages?"+query, nil, a.header())
		if r.StatusCode != 200 {
			t.Fatalf("list_messages?%s: %d %s", query, r.StatusCode, r.Body)
		}
		d := r.JSON()["data"].(map[string]any)
		var subjects []string
		for _, m := range d["messages"].([]any) {
			subjects = append(subjects, strings.TrimPrefix(m.(map[string]any)["subject"].(string), "number "))
		}
		next, _ := d["nextBefore"].(string)
		return subjects, next
	}

	var pages []string
	before := ""
	for range 5 {
		q := "limit=2"
		if before != "" {
			q += "&before=" + before
		}
		got, next := list(q)
		pages = append(pages, strings.Join(got, ""))
		if next == "" {
			break
		}
		before = next
	}
	if strings.Join(pages, "|") != "43|21|0" {
		t.Fatalf("pages, newest first: %v", pages)
	}

	if got, _ := list("from=alice"); strings.Join(got, "") != "20" {
		t.Fatalf("from=alice: %v", got)
	}
	if got, _ := list("from=" + url.QueryEscape("bob@two")); strings.Join(got, "") != "41" {
		t.Fatalf("from=bob@two: %v", got)
	}
	if got, _ := list("since=" + url.QueryEscape(between.Format(time.RFC3339Nano))); strings.Join(got, "") != "43" {
		t.Fatalf("since: %v", got)
	}
	if got, _ := list("since=" + url.QueryEscape(between.Format(time.RFC3339Nano)) + "&from=bob"); strings.Join(got, "") != "4" {
		t.Fatalf("since and from: %v", got)
	}
}

// setup_email's receipt names the add-on and its cost; its undo, carried
// out, takes every mail record out of Pier's DNS and the domain stops
// taking mail.
func TestSetupEmailReceiptAndUndo(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain, _ := mailDomain(t, ts, a, "mailundo")
	md, err := ts.Store().Mail().Domain(context.Background(), domain)
	if err != nil {
		t.Fatal(err)
	}
	task := waitTask(t, ts, a, md.TaskID, "succeeded")
	receipt, _ := task["receipt"].(map[string]any)
	if receipt == nil || receipt["action"] != "setup_email" || receipt["totalUsd"] != 3.0 || receipt["id"] == "" {
		t.Fatalf("receipt: %v", task)
	}
	costs := receipt["costs"].([]any)
	if len(costs) != 1 || costs[0].(map[string]any)["item"] != "email:"+domain || costs[0].(map[string]any)["amountUsd"] != 3.0 {
		t.Fatalf("costs: %v", costs)
	}
	if res := fmt.Sprint(receipt["createdResources"]); !strings.Contains(res, "mail_domain") || !strings.Contains(res, domain) {
		t.Fatalf("created resources: %s", res)
	}
	undo, _ := task["undo"].(map[string]any)
	cmd, _ := undo["command"].(map[string]any)
	if cmd == nil || cmd["tool"] != "remove_email" || undo["irreversible"] == true {
		t.Fatalf("undo: %v", task["undo"])
	}
	call := cmd["http"].(map[string]any)

	// The records are there before.
	if mx := dnsAnswer(t, ts, domain, dns.TypeMX); len(mx) != 1 {
		t.Fatalf("MX before the undo: %v", mx)
	}
	// The undo, as the receipt gives it.
	r := ts.Client.Do(call["method"].(string), call["path"].(string), nil, a.header())
	if r.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", call["method"], call["path"], r.StatusCode, r.Body)
	}
	if d := r.JSON()["data"].(map[string]any); d["state"] != "removed" || d["domain"] != domain || d["receipt"].(map[string]any)["action"] != "remove_email" {
		t.Fatalf("remove_email: %s", r.Body)
	}

	// Gone from Pier's DNS: MX, SPF, DMARC, DKIM and the mail host.
	if mx := dnsAnswer(t, ts, domain, dns.TypeMX); len(mx) != 0 {
		t.Fatalf("MX after the undo: %v", mx)
	}
	if s := txt(dnsAnswer(t, ts, domain, dns.TypeTXT)); strings.Contains(s, "v=spf1") {
		t.Fatalf("SPF after the undo: %q", s)
	}
	if s := txt(dnsAnswer(t, ts, "_dmarc."+domain, dns.TypeTXT)); s != "" {
		t.Fatalf("DMARC after the undo: %q", s)
	}
	if s := txt(dnsAnswer(t, ts, service.DKIMSelector+"._domainkey."+domain, dns.TypeTXT)); s != "" {
		t.Fatalf("DKIM after the undo: %q", s)
	}
	if rr := dnsAnswer(t, ts, "mail."+domain, dns.TypeA); len(rr) != 0 {
		t.Fatalf("the mail host after the undo: %v", rr)
	}
	// The site's own records stay.
	if rr := dnsAnswer(t, ts, domain, dns.TypeA); len(rr) == 0 {
		t.Fatal("the undo took the site's A record too")
	}
	// And the domain takes no more mail.
	if err := sendSMTP(ts.SMTPAddr(), "sender@example.org", []string{"agent@" + domain}, "Subject: x\n\nx\n"); err == nil || !strings.HasPrefix(err.Error(), "550") {
		t.Fatalf("mail after the undo: %v", err)
	}
}

// A changed contact is confirmed again: the change waits on a new
// approval, and the registrant confirmed before stays the domain's until
// a signed-in person confirms the new one.
func TestRegistrantChangeIsVerifiedAgain(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain, _ := mailDomain(t, ts, a, "mailchg")
	c := ts.Client
	b := signIn(t, ts, a.org)
	rdap := func() string {
		return string(c.Do("GET", "/rdap/domain/"+domain, nil, http.Header{"Accept": {"application/rdap+json"}}).Body)
	}
	propose := func(country string) (string, string) {
		t.Helper()
		r := c.Do("PUT", "/v1/domains/"+domain+"/registrant-contact", map[string]any{"name": "Ada Lovelace", "email": "agent@" + domain, "country": country}, a.header())
		if r.StatusCode != 202 || r.JSON()["data"].(map[string]any)["state"] != "input_required" {
			t.Fatalf("propose %s: %d %s", country, r.StatusCode, r.Body)
		}
		data := r.JSON()["data"].(map[string]any)
		return data["taskId"].(string), data["approvalUrl"].(string)
	}
	firstTask, firstApproval := propose("GB")
	approveAt(t, b, firstApproval)
	waitTask(t, ts, a, firstTask, "succeeded")
	if body := rdap(); !strings.Contains(body, `"cc":"GB"`) {
		t.Fatalf("RDAP after the first confirmation: %s", body)
	}

	secondTask, secondApproval := propose("FR")
	if secondApproval == firstApproval {
		t.Fatalf("the change asks for no new approval: %q", secondApproval)
	}
	// Unconfirmed, the change shows nowhere yet.
	if body := rdap(); !strings.Contains(body, `"cc":"GB"`) || strings.Contains(body, `"cc":"FR"`) {
		t.Fatalf("RDAP while the change waits: %s", body)
	}
	if tk := waitTask(t, ts, a, secondTask, "input_required"); tk == nil {
		t.Fatal("the change is not waiting for the person")
	}
	approveAt(t, b, secondApproval)
	waitTask(t, ts, a, secondTask, "succeeded")
	if body := rdap(); !strings.Contains(body, `"cc":"FR"`) || strings.Contains(body, `"cc":"GB"`) {
		t.Fatalf("RDAP after the change is confirmed: %s", body)
	}
}

// A registrant confirmation that goes out through the relay is signed with
// the DKIM key of the sending domain, when that domain's mail is set up,
// and verifies against the key Pier's DNS publishes.
func TestRegistrantConfirmationThroughTheRelayIsSigned(t *testing.T) {
	sink := &relaySink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	relay := gosmtp.NewServer(sink)
	relay.Domain = "relay.test"
	go relay.Serve(ln)
	t.Cleanup(func() { relay.Close() })

	// Pier's own name is a domain it sold, with mail set up: the
	// confirmation goes from registrar@ it.
	own := availableDomains(1, "dev", "mailsig")[0]
	ts := start(t, server.Config{SMTPRelay: "smtp://" + ln.Addr().String(), BaseURL: "http://www." + own})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	if domain, _ := mailDomain(t, ts, a, "mailsig"); domain != own {
		t.Fatalf("bought %s, not %s", domain, own)
	}
	r := ts.Client.Do("PUT", "/v1/domains/"+own+"/registrant-contact", map[string]any{"name": "Ada Lovelace", "email": "ada@example.org", "country": "GB"}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("propose: %d %s", r.StatusCode, r.Body)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.msgs) != 1 {
		t.Fatalf("the relay got %d messages", len(sink.msgs))
	}
	msg := sink.msgs[0]
	if !bytes.Contains(msg, []byte("From: registrar@"+own)) || !confirmLink.Match(msg) {
		t.Fatalf("the confirmation: %s", msg)
	}
	lookup := func(name string) ([]string, error) {
		return []string{txt(dnsAnswer(t, ts, name, dns.TypeTXT))}, nil
	}
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(msg), &dkim.VerifyOptions{LookupTXT: lookup})
	if err != nil || len(vs) != 1 || vs[0].Err != nil || vs[0].Domain != own {
		t.Fatalf("DKIM on the confirmation: %v %+v\n%s", err, vs, msg)
	}
}

// setup_email consumes its whole quote, so a quote that also prices a
// domain or a service is refused rather than charged for what mail setup
// does not buy, and stays held for what it priced.
func TestSetupEmailRefusesAQuoteForMore(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		c := ts.Client
		domain := availableDomains(1, "dev", "mailmore")[0]
		quote := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "www", "target": "edge", "bundleId": upload(t, ts, a, siteSaying("mail")), "domain": domain, "quoteId": quote}, a.header())
		waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")

		q := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{
			map[string]any{"kind": "email", "domain": domain},
			map[string]any{"kind": "service", "workload": "static_site", "target": "edge", "name": "extra", "months": 1},
		}}, a.header())
		if q.StatusCode != 201 {
			t.Fatalf("quote: %d %s", q.StatusCode, q.Body)
		}
		id := q.JSON()["data"].(map[string]any)["quoteId"].(string)
		spentBefore, _ := budget(t, ts, a)
		r = c.Do("POST", "/v1/domains/"+domain+"/email", map[string]any{"quoteId": id}, a.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:quote_mismatch" || !strings.Contains(string(r.Body), "service:") {
			t.Fatalf("setup_email with a quote for more: %d %s", r.StatusCode, r.Body)
		}
		if st := c.Do("GET", "/v1/quotes/"+id, nil, a.header()).JSON()["data"].(map[string]any)["state"]; st != "held" {
			t.Fatalf("the quote after the refusal: %v", st)
		}
		if spent, _ := budget(t, ts, a); spent != spentBefore {
			t.Fatalf("the refusal charged: spent %v, was %v", spent, spentBefore)
		}
	})
}
