package service

import (
	"errors"
	"testing"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// Mail setup is paid by a quote for the mail alone, on an owned domain;
// a second setup answers the first's task and charges nothing more.
func TestMailSetup(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(100, DefaultPolicy(), buyer...), h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "mailer", "dev")
	h.buy(a, "site", dom)
	q := h.quote(a, emailItem(dom))
	mixed := h.quote(a, emailItem(dom), serviceItem("static_site", "edge", ""))
	other := h.quote(a, emailItem("elsewhere.dev"))
	cases := []struct {
		name  string
		p     tenant
		quote string
		code  models.BlockedBy
	}{
		{"not owned", b, q.ID, "conflict:state"},
		{"unknown quote", a, "quo_nope", "not_found:resource"},
		{"quote for other mail", a, other.ID, "input:invalid"},
		{"quote with more", a, mixed.ID, "conflict:quote_mismatch"},
	}
	for _, c := range cases {
		_, err := h.svc.Mail.Setup(h.ctx, c.p.agent, dom, c.quote)
		wantCode(t, err, c.code)
	}
	before := h.remaining(a.org, a.project)
	v, err := h.svc.Mail.Setup(h.ctx, a.agent, dom, q.ID)
	h.must(err)
	again, err := h.svc.Mail.Setup(h.ctx, a.agent, dom, other.ID)
	h.must(err)
	if again.ID != v.ID || h.remaining(a.org, a.project) != before {
		t.Fatalf("a second setup made task %s (first %s) or charged", again.ID, v.ID)
	}
	// DNS not answering yet is transient: the runner retries.
	h.platform.dnsErr = errors.New("NXDOMAIN")
	if err := h.svc.Launches.RunTask(h.ctx, h.platform.take()[0]); err == nil {
		t.Fatal("setup succeeded before DNS answered")
	}
	h.platform.dnsErr = nil
	h.must(h.svc.Launches.RunTask(h.ctx, v.ID))
	got, _ := h.svc.Tasks.Get(h.ctx, a.org, v.ID)
	if got.State != TaskSucceeded || got.Kind != TaskKindEmailSetup || got.Domain != dom {
		t.Fatalf("setup %+v", got)
	}
	z, err := h.st.Domains().Zone(h.ctx, dom)
	h.must(err)
	recs, _ := zone.DecodeRecords(z.Records)
	mx := 0
	for _, r := range recs {
		if isMailRecord(r) {
			mx++
		}
	}
	if mx != 6 {
		t.Fatalf("%d mail records in %+v", mx, recs)
	}
	// Removing it takes the records out; addresses are refused after.
	_, err = h.svc.Mail.Remove(h.ctx, b.agent, dom)
	wantCode(t, err, "mail:not_set_up")
	rm, err := h.svc.Mail.Remove(h.ctx, a.agent, dom)
	h.must(err)
	if d, _ := h.st.Mail().Domain(h.ctx, dom); rm.Domain != dom || MailState(d.State) != MailRemoved {
		t.Fatalf("removal %+v, domain %+v", rm, d)
	}
	_, err = h.svc.Mail.CreateAddress(h.ctx, a.agent, "hi@"+dom, false)
	wantCode(t, err, "mail:not_set_up")
	h.books(a.org, a.project)
}

// Addresses route mail into their inboxes; an organisation reads only
// its own inboxes and messages.
func TestMailboxes(t *testing.T) {
	h := newHarness(t, withInboxBytes(2000))
	a, b := h.tenant(100, DefaultPolicy(), buyer...), h.tenant(100, DefaultPolicy(), buyer...)
	dom := h.mailDomain(a, "boxes")
	addr := "hi@" + dom
	for _, c := range []struct {
		p    tenant
		addr string
		code models.BlockedBy
	}{{a, "not an address", "input:invalid"}, {a, "x@nomail.dev", "mail:not_set_up"}, {b, addr, "mail:not_set_up"}} {
		_, err := h.svc.Mail.CreateAddress(h.ctx, c.p.agent, c.addr, false)
		wantCode(t, err, c.code)
	}
	ad, err := h.svc.Mail.CreateAddress(h.ctx, a.agent, "Hi@"+dom, false)
	h.must(err)
	_, err = h.svc.Mail.CreateAddress(h.ctx, a.agent, addr, false)
	wantCode(t, err, "conflict:state")
	catch, err := h.svc.Mail.CreateAddress(h.ctx, a.agent, "any@"+dom, true)
	h.must(err)
	if catch.Address != "*@"+dom {
		t.Fatalf("catch-all %s", catch.Address)
	}
	if ok, _ := h.svc.Mail.Accepts(h.ctx, "HI@"+dom); !ok {
		t.Fatal("refuses mail for a live address")
	}
	if ok, _ := h.svc.Mail.Accepts(h.ctx, "x@nowhere.dev"); ok {
		t.Fatal("accepts mail for a domain without mail")
	}
	if ok, _ := h.svc.Mail.Fits(h.ctx, "hi@"+dom, 5000); ok {
		t.Fatal("a message over the inbox's limit fits")
	}
	id, err := h.svc.Mail.Deliver(h.ctx, Delivery{MailFrom: "x@y.org", Rcpt: "hi@" + dom, FromHeader: "X <x@y.org>", Subject: "Your code",
		Text: "123456", HTML: "<b>123456</b>", Raw: []byte("raw message"), Attachments: []Attachment{{Filename: "a.txt", ContentType: "text/plain", Data: []byte("att")}},
		Auth: AuthResults{DKIM: "pass", SPF: "pass", DMARC: "pass"}})
	h.must(err)
	_, err = h.svc.Mail.Deliver(h.ctx, Delivery{Rcpt: "hi@" + dom, Raw: make([]byte, 3000)})
	if !errors.Is(err, ErrInboxFull) {
		t.Fatalf("over the limit: %v", err)
	}
	m, err := h.svc.Mail.WaitForMessage(h.ctx, a.org, ad.InboxID, MessageWait{Subject: "code", From: "x@y.org", Since: epoch})
	h.must(err)
	if m.ID != id || m.HTML == "" || len(m.Attachments) != 1 || m.Attachments[0].Size != 3 || m.Auth.DKIM != "pass" {
		t.Fatalf("message %+v", m)
	}
	_, err = h.svc.Mail.WaitForMessage(h.ctx, a.org, ad.InboxID, MessageWait{Subject: "never", Timeout: ptr(time.Duration(0))})
	wantCode(t, err, "mail:no_message")
	// Organisation B reads none of it.
	_, err = h.svc.Mail.Message(h.ctx, b.org, id)
	wantCode(t, err, "not_found:resource")
	_, err = h.svc.Mail.Messages(h.ctx, b.org, ad.InboxID, store.MessageFilter{})
	wantCode(t, err, "not_found:resource")
	_, err = h.svc.Mail.WaitForMessage(h.ctx, b.org, ad.InboxID, MessageWait{})
	wantCode(t, err, "not_found:resource")
	_, err = h.svc.Mail.DeleteMessage(h.ctx, b.org, id)
	wantCode(t, err, "not_found:resource")
	_, err = h.svc.Mail.DeleteAddress(h.ctx, b.agent, ad.ID)
	wantCode(t, err, "not_found:resource")
	if l, _ := h.svc.Mail.Inboxes(h.ctx, b.org, store.Filter{}); len(l.Items) != 0 {
		t.Fatal("org B lists A's inboxes")
	}
	mailboxReads(t, h, a, ad, id)
}

// mailboxReads reads and deletes what TestMailboxes delivered.
func mailboxReads(t *testing.T, h *harness, a tenant, ad *AddressChange, id string) {
	l, err := h.svc.Mail.Messages(h.ctx, a.org, ad.InboxID, store.MessageFilter{Limit: 1, Subject: "code"})
	h.must(err)
	if len(l.Messages) != 1 || l.NextBefore == nil || l.Args["subject"] != "code" || l.Args["limit"] != 1 {
		t.Fatalf("messages %+v", l)
	}
	if m, err := h.svc.Mail.Message(h.ctx, a.org, id); err != nil || m.Subject != "Your code" {
		t.Fatalf("message %+v %v", m, err)
	}
	if in, _ := h.svc.Mail.Inboxes(h.ctx, a.org, store.Filter{}); len(in.Items) != 2 || in.Items[0].BytesLimit != 2000 {
		t.Fatalf("inboxes %+v", in)
	}
	d, err := h.svc.Mail.DeleteMessage(h.ctx, a.org, id)
	h.must(err)
	if d.ID != id || d.Receipt.Action != "delete_message" || !d.Undo.Irreversible {
		t.Fatalf("deleted %+v", d)
	}
	del, err := h.svc.Mail.DeleteAddress(h.ctx, a.agent, ad.ID)
	h.must(err)
	if again, err := h.svc.Mail.DeleteAddress(h.ctx, a.agent, ad.ID); err != nil || !del.Deleted || !again.Deleted || again.Undo.Call.Tool != "create_email_address" {
		t.Fatalf("deleting twice: %+v %v", again, err)
	}
	if list, _ := h.svc.Mail.Addresses(h.ctx, a.org, store.Filter{}); len(list.Items) != 1 || !list.Items[0].CatchAll {
		t.Fatalf("addresses %+v", list.Items)
	}
}

// Sending signs with the domain's key and goes through the relay; without
// one, or from an address that is not the caller's, it is refused.
func TestMailSend(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(100, DefaultPolicy(), buyer...), h.tenant(100, DefaultPolicy(), buyer...)
	dom := h.mailDomain(a, "sender")
	_, err := h.svc.Mail.CreateAddress(h.ctx, a.agent, "out@"+dom, false)
	h.must(err)
	req := SendRequest{From: "out@" + dom, To: []string{"you@example.org"}, Subject: "Hi\r\nBcc: x", Text: "hello\nthere"}
	sent, err := h.svc.Mail.Send(h.ctx, a.agent, req)
	h.must(err)
	if sent.Relay != "relay.test" || len(h.relay.msgs) != 1 || !contains(h.relay.msgs[0], "DKIM-Signature:") || contains(h.relay.msgs[0], "\r\nBcc:") {
		t.Fatalf("sent %+v: %q", sent, h.relay.msgs)
	}
	for _, c := range []struct {
		p    tenant
		from string
		code models.BlockedBy
	}{{a, "bad", "input:invalid"}, {a, "nobody@" + dom, "mail:not_set_up"}, {b, req.From, "mail:not_set_up"}} {
		_, err := h.svc.Mail.Send(h.ctx, c.p.agent, SendRequest{From: c.from, To: req.To, Subject: "x", Text: "y"})
		wantCode(t, err, c.code)
	}
	h.relay.err = errors.New("550 no")
	_, err = h.svc.Mail.Send(h.ctx, a.agent, req)
	wantCode(t, err, "provider:failed")

	h2 := newHarness(t, withoutRelay)
	c := h2.tenant(10, DefaultPolicy())
	_, err = h2.svc.Mail.Send(h2.ctx, c.agent, req)
	wantCode(t, err, "mail:relay_unconfigured")
}

// RDAP answers for names Pier sold, the registrant redacted.
func TestRDAP(t *testing.T) {
	h := newHarness(t)
	a := h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "rdap", "dev")
	h.buy(a, "site", dom)
	out, err := h.svc.Mail.RDAP(h.ctx, dom)
	h.must(err)
	if out["ldhName"] != dom || out["handle"] == "" || out["entities"] != nil {
		t.Fatalf("rdap %v", out)
	}
	_, err = h.svc.Mail.RDAP(h.ctx, "unsold.dev")
	wantCode(t, err, "not_found:resource")
}
