package server_test

import (
	"context"
	"encoding/json"
	"html"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// startRelay runs a second SMTP server standing for the smarthost and
// answers what it received so far.
func startRelay(t *testing.T) (*relaySink, string) {
	t.Helper()
	sink := &relaySink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	relay := gosmtp.NewServer(sink)
	relay.Domain = "relay.test"
	go relay.Serve(ln)
	t.Cleanup(func() { relay.Close() })
	return sink, "smtp://" + ln.Addr().String()
}

func (r *relaySink) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, m := range r.msgs {
		b.Write(m)
	}
	return b.String()
}

// agentCanRead is everything an agent key of a's organisation can read
// over the API: every inbox and message, every task, the ledger, the
// domains and email addresses.
func agentCanRead(t *testing.T, ts *testServer, a account) string {
	t.Helper()
	c := ts.Client
	var b strings.Builder
	get := func(path string) map[string]any {
		r := c.Do("GET", path, nil, a.header())
		b.Write(r.Body)
		return r.JSON()
	}
	for _, in := range get("/v1/inboxes")["data"].(map[string]any)["inboxes"].([]any) {
		id := in.(map[string]any)["id"].(string)
		msgs, _ := get("/v1/inboxes/" + id + "/messages")["data"].(map[string]any)["messages"].([]any)
		for _, m := range msgs {
			get("/v1/messages/" + m.(map[string]any)["id"].(string))
		}
	}
	for _, tk := range get("/v1/tasks")["data"].(map[string]any)["tasks"].([]any) {
		get("/v1/tasks/" + tk.(map[string]any)["taskId"].(string))
	}
	get("/v1/ledger?limit=1000")
	get("/v1/domains")
	get("/v1/email-addresses")
	return b.String()
}

// approveAt approves a gate as the signed-in person b.
func approveAt(t *testing.T, b *browser, approval string) {
	t.Helper()
	page := b.get(approval)
	if p := b.post(approval, url.Values{"csrf": {csrfOf(t, page)}, "decision": {"approve"}}); p.status != 303 {
		t.Fatalf("approve %s: %d %s", approval, p.status, p.body)
	}
}

func ledgerActors(t *testing.T, ts *testServer, a account, action string) []string {
	t.Helper()
	page := ts.Client.Do("GET", "/v1/ledger?limit=1000", nil, a.header()).JSON()["data"].(map[string]any)
	var out []string
	for _, e := range page["entries"].([]any) {
		if e := e.(map[string]any); e["action"] == action {
			out = append(out, e["actor"].(string))
		}
	}
	return out
}

// TestAgentCannotConfirmItsOwnRegistrant is the attack: an agent proposes
// an address of its own Pier-hosted domain as registrant, with a key that
// reads every inbox of its organisation, and tries to complete the
// confirmation with whatever it can read and any page it can GET or POST
// without a human session. No link goes to an address its keys can read
// (in any spelling, with or without an inbox there), nothing it can read
// carries one, and the proposal stays waiting for a person.
func TestAgentCannotConfirmItsOwnRegistrant(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		sink, relay := startRelay(t)
		ts := start(t, server.Config{DatabaseURL: db, SMTPRelay: relay})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain, _ := mailDomain(t, ts, a, "regattack")
		c := ts.Client
		// A catch-all too, so every address on the domain has an inbox the
		// agent reads.
		if r := c.Do("POST", "/v1/email-addresses", map[string]any{"address": "any@" + domain, "catchAll": true}, a.header()); r.StatusCode != 201 {
			t.Fatalf("catch-all: %d %s", r.StatusCode, r.Body)
		}
		label, tld, _ := strings.Cut(domain, ".")
		fullwidth := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' {
				return r - 'a' + 'ａ'
			}
			return r
		}, label) + "." + tld

		for _, email := range []string{
			"agent@" + domain,                  // its inbox
			"AGENT@" + strings.ToUpper(domain), // in capitals
			"agent+registrant@" + domain,       // plus-addressed
			"nobody@" + domain,                 // no address of its own: the catch-all's
			"Ada <agent@" + domain + ">",       // behind a display name
			"agent@" + fullwidth,               // the same name in full-width letters (IDNA maps them)
			"agent@mail." + domain,             // a subdomain, whose MX the agent can write
			"agent@site--x.localhost",          // a preview host
		} {
			registrantProposalWaitsForAHuman(t, ts, a, sink, domain, email)
		}
		// A trailing dot is not an address the contract takes.
		if r := c.Do("PUT", "/v1/domains/"+domain+"/registrant-contact", map[string]any{"name": "Mallory Agent", "email": "agent@" + domain + ".", "country": "ZZ"}, a.header()); r.StatusCode != 400 || r.JSON()["retryable"] != false {
			t.Fatalf("a trailing dot: %d %s", r.StatusCode, r.Body)
		}
		// RDAP shows no registrant of the agent's choosing, and the ledger
		// no confirmation at all.
		if body := string(c.Do("GET", "/rdap/domain/"+domain, nil, http.Header{"Accept": {"application/rdap+json"}}).Body); strings.Contains(body, "registrant") || strings.Contains(body, `"ZZ"`) {
			t.Fatalf("RDAP: %s", body)
		}
		if actors := ledgerActors(t, ts, a, "confirm_registrant"); len(actors) != 0 {
			t.Fatalf("confirmations in the ledger: %v", actors)
		}
	})
}

// registrantProposalWaitsForAHuman proposes email as the registrant's and
// wants the task waiting for a human whatever the agent can read or reach:
// no confirmation link in any inbox or through the relay, and no page
// without a session that decides the gate.
func registrantProposalWaitsForAHuman(t *testing.T, ts *testServer, a account, sink *relaySink, domain, email string) {
	t.Helper()
	c := ts.Client
	r := c.Do("PUT", "/v1/domains/"+domain+"/registrant-contact", map[string]any{"name": "Mallory Agent", "email": email, "country": "ZZ"}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("propose %s: %d %s", email, r.StatusCode, r.Body)
	}
	data := r.JSON()["data"].(map[string]any)
	taskID := data["taskId"].(string)

	// Everything the agent can read carries no confirmation link,
	// and nothing went out through the relay either. Were there
	// one, the agent would open it and press its button.
	if link := confirmLink.FindString(agentCanRead(t, ts, a) + sink.all()); link != "" {
		b := newBrowser(t, ts)
		path := link[strings.Index(link, "/registrant/"):]
		if m := csrfField.FindStringSubmatch(b.get(path).body); m != nil {
			b.post(path, url.Values{"csrf": {m[1]}})
		}
		t.Errorf("propose %s: the agent read a confirmation link", email)
	}
	if tk := c.Do("GET", "/v1/tasks/"+taskID, nil, a.header()).JSON()["data"].(map[string]any); tk["state"] != "input_required" {
		t.Fatalf("propose %s: with what it can read, the agent took the task to %v", email, tk["state"])
	}
	approval, _ := data["approvalUrl"].(string)
	if data["state"] != "input_required" || !strings.Contains(approval, "/approvals/gat_") {
		t.Fatalf("propose %s: the task shows no approval URL: %s", email, r.Body)
	}
	if step := data["steps"].([]any)[0].(map[string]any); !strings.Contains(step["detail"].(string), "no link was mailed") {
		t.Errorf("propose %s: %v", email, step)
	}
	gateID := approval[strings.LastIndex(approval, "/")+1:]

	// Every page it can reach without a session, with and without
	// its key: none decides.
	u, _ := url.Parse(approval)
	for _, h := range []http.Header{{}, {"Authorization": {"Bearer " + a.key}}} {
		for _, m := range []string{"GET", "POST"} {
			for _, path := range []string{u.Path, "/registrant/confirm/" + gateID, "/registrant/confirm/" + taskID} {
				st, _ := rawDo(t, c.BaseURL, m, path, "application/x-www-form-urlencoded", url.Values{"decision": {"approve"}, "csrf": {"guess"}}.Encode(), h)
				if st < 400 {
					t.Errorf("%s %s: %d", m, path, st)
				}
			}
		}
	}
	tk := c.Do("GET", "/v1/tasks/"+taskID, nil, a.header()).JSON()["data"].(map[string]any)
	if tk["state"] != "input_required" {
		t.Fatalf("propose %s: the task is %v", email, tk["state"])
	}
	if g, err := ts.Store().Gates().Get(context.Background(), a.org, gateID); err != nil || g.State != "pending" {
		t.Fatalf("propose %s: gate %s (%v)", email, g.State, err)
	}
}

// A link mailed to an address nobody at Pier could read stops working once
// agents of the organisation could: the agent that bought the address's
// domain after proposing it cannot confirm with the link it now reads.
func TestRegistrantLinkStopsWhenItsAddressBecomesAgentReadable(t *testing.T) {
	sink, relay := startRelay(t)
	ts := start(t, server.Config{SMTPRelay: relay})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain, _ := mailDomain(t, ts, a, "reglate")
	later := availableDomains(1, "dev", "reglater")[0]
	r := ts.Client.Do("PUT", "/v1/domains/"+domain+"/registrant-contact", map[string]any{"name": "Mallory Agent", "email": "agent@" + later, "country": "ZZ"}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("propose: %d %s", r.StatusCode, r.Body)
	}
	task := r.JSON()["data"].(map[string]any)["taskId"].(string)
	link := confirmLink.FindString(sink.all())
	if link == "" {
		t.Fatalf("no link went to the outside address: %q", sink.all())
	}
	path := link[strings.Index(link, "/registrant/"):]
	b := newBrowser(t, ts)
	before := b.get(path)
	if before.status != 200 {
		t.Fatalf("the link before: %d %s", before.status, before.body)
	}
	// The agent buys the address's domain.
	quote := ts.Client.Do("POST", "/v1/quotes", domainQuote(a.project, later, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
	l := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "late", "target": "edge", "bundleId": upload(t, ts, a, siteSaying("late")), "domain": later, "quoteId": quote}, a.header())
	waitTask(t, ts, a, l.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if st, body := rawDo(t, ts.Client.BaseURL, "GET", path, "", "", nil); st != 403 || !strings.Contains(body, "signs in") {
		t.Fatalf("the link after the domain was bought: %d %s", st, body)
	}
	// Its button, on the page opened before, confirms nothing either.
	if p := b.post(path, url.Values{"csrf": {csrfOf(t, before)}}); p.status != 403 || !strings.Contains(p.body, "signs in") {
		t.Fatalf("the button after the domain was bought: %d %s", p.status, p.body)
	}
	if tk := waitTask(t, ts, a, task, "input_required"); tk["approvalUrl"] == nil {
		t.Fatalf("the task lost its approval URL: %v", tk)
	}
}

// TestSignedInHumanConfirmsRegistrant: a person of the organisation, signed
// in, confirms at the task's approval URL; the registrar records it and
// the ledger's actor is that person. A denial records nothing.
func TestSignedInHumanConfirmsRegistrant(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain, _ := mailDomain(t, ts, a, "reghuman")
		c := ts.Client
		propose := func(country string) (string, string) {
			t.Helper()
			r := c.Do("PUT", "/v1/domains/"+domain+"/registrant-contact", map[string]any{"name": "Ada Lovelace", "email": "agent@" + domain,
				"street": "12 St James's Square", "city": "London", "country": country}, a.header())
			if r.StatusCode != 202 {
				t.Fatalf("propose: %d %s", r.StatusCode, r.Body)
			}
			env := r.JSON()
			// The answer's actions lead with the approval URL for the
			// human, then the poll.
			first := env["actions"].([]any)[0].(map[string]any)
			approval := env["data"].(map[string]any)["approvalUrl"].(string)
			if first["kind"] != "url" || first["url"] != approval {
				t.Fatalf("propose: actions %v", env["actions"])
			}
			return env["data"].(map[string]any)["taskId"].(string), approval
		}

		// Denied: nothing is recorded and the task ends.
		denied, deniedURL := propose("FR")
		b := signIn(t, ts, a.org)
		page := b.get(deniedURL)
		if p := b.post(deniedURL, url.Values{"csrf": {csrfOf(t, page)}, "decision": {"deny"}}); p.status != 303 {
			t.Fatalf("deny: %d %s", p.status, p.body)
		}
		if tk := waitTask(t, ts, a, denied, "failed"); tk["result"].(map[string]any)["blockedBy"] != "approval:denied" {
			t.Fatalf("denied task: %v", tk)
		}

		task, approval := propose("GB")
		// The task, polled, shows the approval URL and leads with it.
		got := c.Do("GET", "/v1/tasks/"+task, nil, a.header()).JSON()
		if got["data"].(map[string]any)["approvalUrl"] != approval || got["actions"].([]any)[0].(map[string]any)["url"] != approval {
			t.Fatalf("the polled task: %v", got)
		}
		page = b.get(approval)
		text := html.UnescapeString(page.body)
		for _, want := range []string{"Confirm Ada Lovelace as the registrant of " + domain, "agent@" + domain, "London", "GB", "No link was mailed", "Asked by"} {
			if !strings.Contains(text, want) {
				t.Errorf("the approval page lacks %q", want)
			}
		}
		if strings.Contains(text, "Price now") {
			t.Error("the approval page prices a registrant")
		}
		if p := b.post(approval, url.Values{"csrf": {csrfOf(t, page)}, "decision": {"approve"}}); p.status != 303 {
			t.Fatalf("approve: %d %s", p.status, p.body)
		}
		waitTask(t, ts, a, task, "succeeded")
		if after := html.UnescapeString(b.get(approval).body); !strings.Contains(after, "Confirmed: the registrar records Ada Lovelace as the registrant of "+domain) {
			t.Errorf("after approving: %s", after)
		}
		// A second decision is refused.
		if p := b.post(approval, url.Values{"csrf": {csrfOf(t, b.get("/dashboard"))}, "decision": {"deny"}}); p.status != 409 {
			t.Errorf("a second decision: %d", p.status)
		}
		rd := string(c.Do("GET", "/rdap/domain/"+domain, nil, http.Header{"Accept": {"application/rdap+json"}}).Body)
		if !strings.Contains(rd, `"cc":"GB"`) || strings.Contains(rd, `"cc":"FR"`) {
			t.Fatalf("RDAP: %s", rd)
		}
		// The ledger names the person who confirmed, not a placeholder.
		h, err := ts.Store().Accounts().LocalOperator(context.Background(), a.org)
		if err != nil {
			t.Fatal(err)
		}
		actors := ledgerActors(t, ts, a, "confirm_registrant")
		if len(actors) != 1 || actors[0] != "human:"+h.ID {
			t.Fatalf("confirm_registrant actors %v, want human:%s", actors, h.ID)
		}
	})
}

// A registrant's address must be one mail goes to as written: quoted local
// parts, address literals and names that are not public domains are
// refused with the typed error envelope.
func TestRegistrantEmailIsRefusedWhenItIsNotAPlainAddress(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain := availableDomains(1, "dev", "regbad")[0]
	quote := ts.Client.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
	l := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "www", "target": "edge", "bundleId": upload(t, ts, a, siteSaying("bad")), "domain": domain, "quoteId": quote}, a.header())
	waitTask(t, ts, a, l.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	for _, email := range []string{`"agent@x"@example.org`, "agent@[127.0.0.1]", "agent@localhost", "agent@example.123", "a@b@example.org", "agent(comment)@example.org", "agent@-bad-.org"} {
		r := ts.Client.Do("PUT", "/v1/domains/"+domain+"/registrant-contact", map[string]any{"name": "Ada Lovelace", "email": email, "country": "GB"}, a.header())
		env := r.JSON()
		acts, _ := env["actions"].([]any)
		if r.StatusCode != 400 || !strings.HasPrefix(env["blockedBy"].(string), "input:") || env["retryable"] != false || len(acts) == 0 {
			t.Errorf("%s: %d %s", email, r.StatusCode, r.Body)
		}
	}
	raw, _ := json.Marshal(ledgerActors(t, ts, a, "set_registrant_contact"))
	if string(raw) != "null" {
		t.Fatalf("refused proposals reached the ledger: %s", raw)
	}
}
