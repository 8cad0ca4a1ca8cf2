package service

import (
	"errors"
	"regexp"
	"testing"

	"github.com/pierhq/pier/models"
)

var confirmLink = regexp.MustCompile(`/registrant/confirm/([0-9a-f]+)`)

// lastToken is the token of the newest confirmation link the relay sent.
func (h *harness) lastToken() string {
	h.t.Helper()
	h.relay.mu.Lock()
	defer h.relay.mu.Unlock()
	if len(h.relay.msgs) == 0 {
		h.t.Fatal("no link was mailed")
	}
	m := confirmLink.FindStringSubmatch(h.relay.msgs[len(h.relay.msgs)-1])
	if m == nil {
		h.t.Fatal("the message carries no link")
	}
	return m[1]
}

func contact(email string) RegistrantContact {
	return RegistrantContact{Name: "Ada Lovelace", Email: email, Country: "GB"}
}

// A registrant at an address no agent key can read is confirmed from the
// mailed link, once; a second press answers confirmed again.
func TestRegistrantConfirmedByLink(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(100, DefaultPolicy(), buyer...), h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "owner", "dev")
	h.buy(a, "site", dom)
	for _, c := range []struct {
		p     tenant
		email string
		code  models.BlockedBy
	}{{a, "not-an-address", "input:invalid"}, {a, `"quoted"@example.org`, "input:invalid"}, {a, "a@[192.0.2.1]", "input:invalid"},
		{a, "a@localhost", "input:invalid"}, {b, "ada@example.org", "conflict:state"}} {
		_, _, err := h.svc.Mail.SetRegistrant(h.ctx, c.p.agent, dom, contact(c.email))
		wantCode(t, err, c.code)
	}
	v, mailed, err := h.svc.Mail.SetRegistrant(h.ctx, a.agent, dom, contact("ada@Example.ORG"))
	h.must(err)
	if v.State != TaskInputRequired || !mailed || h.relay.sent[0] != "ada@example.org" {
		t.Fatalf("proposal %+v mailed=%v sent to %v", v, mailed, h.relay.sent)
	}
	token := h.lastToken()
	prop, err := h.svc.Mail.RegistrantByToken(h.ctx, token)
	h.must(err)
	if prop.Domain != dom || prop.State != "pending" {
		t.Fatalf("proposal %+v", prop)
	}
	for range 2 {
		prop, err = h.svc.Mail.ConfirmRegistrant(h.ctx, token)
		if err != nil || prop.State != "confirmed" {
			t.Fatalf("confirm: %+v %v", prop, err)
		}
	}
	if got := h.task(a.org, v.ID); got.State != "succeeded" {
		t.Fatalf("task %s", got.State)
	}
	if r, _ := h.svc.Mail.RDAP(h.ctx, dom); r["entities"] == nil {
		t.Fatal("RDAP shows no registrant")
	}
	if _, err := h.svc.Mail.RegistrantByToken(h.ctx, "bogus"); err == nil {
		t.Fatal("a bogus token names a proposal")
	}
	// A link older than RegistrantTTL stops working.
	h.clock.Advance(RegistrantTTL + 1)
	if _, err := h.svc.Mail.RegistrantByToken(h.ctx, token); err == nil {
		t.Fatal("an expired link still works")
	}
}

// An agent cannot confirm a registrant it can read mail for: no link goes
// to such an address, and only a signed-in person decides the gate.
func TestRegistrantAgentReadable(t *testing.T) {
	h := newHarness(t)
	a := h.tenant(100, DefaultPolicy(), buyer...)
	dom := h.mailDomain(a, "readable")
	for _, email := range []string{"me@" + dom, "me@sub." + dom, "bot@pier.test", "x@app.preview.test"} {
		h.relay.msgs = nil
		v, mailed, err := h.svc.Mail.SetRegistrant(h.ctx, a.agent, dom, contact(email))
		h.must(err)
		if len(h.relay.msgs) != 0 || mailed {
			t.Fatalf("%s: a link went out", email)
		}
		gates, _ := h.svc.Approvals.Pending(h.ctx, a.org)
		if len(gates) != 1 || gates[0].TaskID != v.ID {
			t.Fatalf("%s: pending %+v", email, gates)
		}
		gv, _ := h.svc.Approvals.GateFor(h.ctx, a.human, gates[0].ID)
		if gv.LinkMailed || gv.NoLinkWhy == "" || gv.Title != "Confirm Ada Lovelace as the registrant of "+dom {
			t.Fatalf("%s: gate %+v", email, gv)
		}
	}
	// The newest proposal stands; the person approves it.
	gates, _ := h.svc.Approvals.Pending(h.ctx, a.org)
	h.must(h.svc.Approvals.Decide(h.ctx, a.human, gates[0].ID, true))
	if got := h.task(a.org, gates[0].TaskID); got.State != "succeeded" {
		t.Fatalf("task %s", got.State)
	}
	wantCode(t, h.svc.Approvals.Decide(h.ctx, a.human, gates[0].ID, false), "conflict:state")
}

// A newer proposal supersedes the older's link; a denial at the gate
// declines it; a link that cannot be sent ends the proposal.
func TestRegistrantSupersededDeclinedUnsent(t *testing.T) {
	h := newHarness(t)
	a := h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "swap", "dev")
	h.buy(a, "site", dom)
	first, _, err := h.svc.Mail.SetRegistrant(h.ctx, a.agent, dom, contact("one@example.org"))
	h.must(err)
	old := h.lastToken()
	_, _, err = h.svc.Mail.SetRegistrant(h.ctx, a.agent, dom, contact("two@example.org"))
	h.must(err)
	if _, err := h.svc.Mail.RegistrantByToken(h.ctx, old); !errors.Is(err, ErrRegistrantSuperseded) {
		t.Fatalf("old link: %v", err)
	}
	if _, err := h.svc.Mail.ConfirmRegistrant(h.ctx, old); !errors.Is(err, ErrRegistrantSuperseded) {
		t.Fatalf("confirm old link: %v", err)
	}
	if got := h.task(a.org, first.ID); got.State != "failed" {
		t.Fatalf("superseded task %s", got.State)
	}
	second := h.lastToken()
	gates, _ := h.svc.Approvals.Pending(h.ctx, a.org)
	h.must(h.svc.Approvals.Decide(h.ctx, a.human, gates[0].ID, false))
	if _, err := h.svc.Mail.ConfirmRegistrant(h.ctx, second); !errors.Is(err, ErrRegistrantDeclined) {
		t.Fatalf("declined link: %v", err)
	}
	h.relay.err = errors.New("relay down")
	_, _, err = h.svc.Mail.SetRegistrant(h.ctx, a.agent, dom, contact("three@example.org"))
	if err == nil {
		t.Fatal("a proposal whose link was not sent succeeded")
	}
	if gates, _ := h.svc.Approvals.Pending(h.ctx, a.org); len(gates) != 0 {
		t.Fatalf("an unsent proposal left %d gates open", len(gates))
	}
	h2 := newHarness(t, withoutRelay)
	c := h2.tenant(100, DefaultPolicy(), buyer...)
	dom2 := freeDomain(t, "norelay", "dev")
	h2.buy(c, "site", dom2)
	_, _, err = h2.svc.Mail.SetRegistrant(h2.ctx, c.agent, dom2, contact("ada@example.org"))
	wantCode(t, err, "mail:relay_unconfigured")
}

// A link to an address that agents can read by the time it is pressed
// needs a signed-in person.
func TestRegistrantLinkRejudged(t *testing.T) {
	h := newHarness(t)
	a := h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "judge", "dev")
	h.buy(a, "site", dom)
	mailDom := freeDomain(t, "later", "dev")
	_, _, err := h.svc.Mail.SetRegistrant(h.ctx, a.agent, dom, contact("ada@"+mailDom))
	h.must(err)
	token := h.lastToken()
	h.buy(a, "later", mailDom) // now its DNS is written with agent keys
	if _, err := h.svc.Mail.ConfirmRegistrant(h.ctx, token); !errors.Is(err, ErrRegistrantNeedsSession) {
		t.Fatalf("confirm: %v", err)
	}
}
