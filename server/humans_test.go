package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/service"
)

// browser is a person's browser on the human pages: a cookie jar, and no
// automatic redirects so each step can be checked.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, ts *testServer) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: ts.Client.BaseURL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (b *browser) do(method, path string, form url.Values, header http.Header) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	// Links the server hands out name localhost; the test dials
	// 127.0.0.1, and one cookie jar must see one host.
	if pu, err := url.Parse(path); err == nil && pu.Host != "" {
		path = pu.RequestURI()
	}
	u := b.base + path
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, body: string(raw), location: resp.Header.Get("Location"), header: resp.Header}
}

func (b *browser) get(path string) page { b.t.Helper(); return b.do("GET", path, nil, nil) }

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	return b.do("POST", path, form, nil)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, p page) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no form token on the page (%d):\n%s", p.status, p.body)
	}
	return m[1]
}

// signIn signs a browser in as the local operator of org.
func signIn(t *testing.T, ts *testServer, org string) *browser {
	t.Helper()
	link, _, err := ts.Service().Accounts.LocalOperatorSignIn(context.Background(), org, "")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, ts)
	confirm := b.get(link)
	if confirm.status != http.StatusOK || !strings.Contains(confirm.body, "Sign in to Pier") {
		t.Fatalf("sign-in confirm page: %d", confirm.status)
	}
	p := b.post(link, url.Values{"csrf": {csrfOf(t, confirm)}})
	if p.status != http.StatusSeeOther || p.location != "/dashboard" {
		t.Fatalf("sign-in: %d %s", p.status, p.location)
	}
	return b
}

// generous keeps the signup bucket out of the way of tests that poll a lot.
var generous = map[string]ratelimit.Policy{"signup": {PerSecond: 100, Burst: 100}}

func pollSignup(ts *testServer, id, secret string) (int, map[string]any) {
	r := ts.Client.Do("POST", "/v1/signup/poll", map[string]any{"signupSessionId": id, "claimSecret": secret}, nil)
	return r.StatusCode, r.JSON()
}

// TestSignupOverHTTP walks the signup the way the README does, without a
// browser: every step follows the typed actions of the step before.
func TestSignupOverHTTP(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db, RateLimits: generous})
		su := startSignup(t, ts)
		su.pollIsBoundToTheSecret()
		b, cardPage := su.humanReviewsAndApproves()
		su.declinedCardThenGoodCard(b, cardPage)
		key := su.keyComesExactlyOnce()
		su.projectIsAsReviewed(key)
		su.ledgerHoldsEveryStep(key)
	})
}

// signupRun is a signup an agent started: its session, the secret that
// claims it, and the link a human reviews it at.
type signupRun struct {
	t                  *testing.T
	ts                 *testServer
	id, secret, review string
}

// startSignup starts a signup and wants the review link as an action for
// a human and the poll as the next call, the link without the session's
// capability fields.
func startSignup(t *testing.T, ts *testServer) *signupRun {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/signup", map[string]any{"email": "ada@example.com", "organizationName": "Analytical"}, nil)
	if r.StatusCode != 201 {
		t.Fatalf("signup: %d %s", r.StatusCode, r.Body)
	}
	env := r.JSON()
	data := env["data"].(map[string]any)
	id, secret, review := data["signupSessionId"].(string), data["claimSecret"].(string), data["reviewUrl"].(string)
	acts := env["actions"].([]any)
	reviewAct, pollAct := acts[0].(map[string]any), acts[1].(map[string]any)
	if reviewAct["kind"] != "url" || reviewAct["purpose"] != "review_signup" || reviewAct["actor"] != "human" || reviewAct["url"] != review {
		t.Fatalf("review action %v", reviewAct)
	}
	if pollAct["tool"] != "poll_signup" || pollAct["http"].(map[string]any)["path"] != "/v1/signup/poll" || pollAct["retryAfterSeconds"] != 5.0 {
		t.Fatalf("poll action %v", pollAct)
	}
	if strings.Contains(review, id) || strings.Contains(review, secret) {
		t.Fatal("the review URL carries a private capability field")
	}
	return &signupRun{t: t, ts: ts, id: id, secret: secret, review: review}
}

// The poll is bound to the secret: a wrong secret and an unknown session
// get the same answer.
func (su *signupRun) pollIsBoundToTheSecret() {
	t := su.t
	t.Helper()
	st1, wrong := pollSignup(su.ts, su.id, "not-the-secret")
	st2, unknown := pollSignup(su.ts, "sus_unknown", su.secret)
	if st1 != 404 || st2 != 404 || wrong["message"] != unknown["message"] || wrong["blockedBy"] != "not_found:resource" {
		t.Fatalf("wrong secret %d %v, unknown %d %v", st1, wrong, st2, unknown)
	}
	if r := su.ts.Client.Do("POST", "/v1/signup/poll", map[string]any{"signupSessionId": su.id}, nil); r.StatusCode != 400 {
		t.Fatalf("missing secret: %d", r.StatusCode)
	}
	if st, p := pollSignup(su.ts, su.id, su.secret); st != 200 || p["data"].(map[string]any)["state"] != "pending_review" {
		t.Fatalf("pending: %d %v", st, p)
	}
}

// The human reviews and approves, once; the poll then points the agent at
// the card page. It answers the human's browser and the card page.
func (su *signupRun) humanReviewsAndApproves() (*browser, string) {
	t := su.t
	t.Helper()
	b := newBrowser(t, su.ts)
	p := b.get(su.review)
	for _, want := range []string{"key can do", "buy_domain", ".com", "$11.25", "managed_postgres", "Analytical", "ada@example.com"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("review page lacks %q", want)
		}
	}
	form := url.Values{"csrf": {csrfOf(t, p)}, "org_name": {"Analytical Engines"}, "project_name": {"site"}, "budget": {"75.50"},
		"approval_above": {"20"}, "human_name": {"Ada"}, "email": {"ada@example.com"}, "approve": {"1"}}
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("csrf", "forged")
	if p := b.post(su.review, bad); p.status != 403 {
		t.Fatalf("forged form token: %d", p.status)
	}
	p = b.post(su.review, form)
	if p.status != 303 || !strings.HasPrefix(p.location, "/billing/bss_") {
		t.Fatalf("approve: %d %s %s", p.status, p.location, p.body)
	}
	cardPage := p.location
	// A second approval of the same review link is refused.
	if p := newBrowser(t, su.ts).get(su.review); p.status != 409 {
		t.Fatalf("reviewed link, another browser: %d", p.status)
	}
	st, polled := pollSignup(su.ts, su.id, su.secret)
	pd := polled["data"].(map[string]any)
	if st != 200 || pd["state"] != "pending_card" {
		t.Fatalf("after review: %v", polled)
	}
	if a := polled["actions"].([]any)[0].(map[string]any); a["purpose"] != "card_setup" || !strings.HasSuffix(a["url"].(string), cardPage) {
		t.Fatalf("card action %v", a)
	}
	return b, cardPage
}

// A declined card is refused; the good one is accepted.
func (su *signupRun) declinedCardThenGoodCard(b *browser, cardPage string) {
	t := su.t
	t.Helper()
	p := b.get(cardPage)
	token := csrfOf(t, p)
	p = b.post(cardPage, url.Values{"csrf": {token}, "number": {"4000 0000 0000 0002"}, "expiry": {"12/30"}, "cvc": {"123"}})
	if p.status != 402 || !strings.Contains(p.body, "declined") || !strings.Contains(p.body, "What to do") {
		t.Fatalf("declined card: %d %s", p.status, p.body)
	}
	if _, polled := pollSignup(su.ts, su.id, su.secret); polled["data"].(map[string]any)["apiKey"] != nil {
		t.Fatal("a key before the card")
	}
	p = b.post(cardPage, url.Values{"csrf": {token}, "number": {"4242 4242 4242 4242"}, "expiry": {"12/30"}, "cvc": {"123"}})
	if p.status != 200 || !strings.Contains(p.body, "visa •••• 4242") {
		t.Fatalf("good card: %d %s", p.status, p.body)
	}
	if strings.Contains(p.body, "4242 4242 4242 4242") && !strings.Contains(p.body, "placeholder") {
		t.Fatal("the full number came back")
	}
}

// The key comes exactly once; later polls find the signup claimed.
func (su *signupRun) keyComesExactlyOnce() string {
	t := su.t
	t.Helper()
	st, polled := pollSignup(su.ts, su.id, su.secret)
	pd := polled["data"].(map[string]any)
	key, _ := pd["apiKey"].(string)
	if st != 200 || pd["state"] != "complete" || !strings.HasPrefix(key, "agk_") {
		t.Fatalf("complete: %v", polled)
	}
	for i := 0; i < 2; i++ {
		_, again := pollSignup(su.ts, su.id, su.secret)
		if d := again["data"].(map[string]any); d["state"] != "claimed" || d["apiKey"] != nil {
			t.Fatalf("later poll: %v", again)
		}
	}
	return key
}

// projectIsAsReviewed wants the new key to see one project, named,
// budgeted and gated as the human set it on the review page.
func (su *signupRun) projectIsAsReviewed(key string) {
	t := su.t
	t.Helper()
	r := su.ts.Client.Do("GET", "/v1/projects", nil, http.Header{"Authorization": {"Bearer " + key}})
	projects := r.JSON()["data"].(map[string]any)["projects"].([]any)
	if r.StatusCode != 200 || len(projects) != 1 {
		t.Fatalf("projects with the new key: %d %s", r.StatusCode, r.Body)
	}
	prj := projects[0].(map[string]any)
	rules := prj["policy"].(map[string]any)["approvalRules"].(map[string]any)
	if prj["budgetLimitUsd"] != 75.5 || prj["name"] != "site" || rules["approvalAboveUsd"] != 20.0 || rules["domainPurchases"] != "human_gate" {
		t.Fatalf("project %v", prj)
	}
}

// Every step is in the organisation's chain, and the chain holds.
func (su *signupRun) ledgerHoldsEveryStep(key string) {
	t := su.t
	t.Helper()
	page := su.ts.Client.Do("GET", "/v1/ledger?limit=1000", nil, http.Header{"Authorization": {"Bearer " + key}}).JSON()["data"].(map[string]any)
	var entries []ledger.Entry
	raw, _ := json.Marshal(page["entries"])
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&entries); err != nil {
		t.Fatal(err)
	}
	if b := ledger.Verify(entries); b != nil {
		t.Fatal(b)
	}
	var actionsSeen []string
	for _, e := range entries {
		actionsSeen = append(actionsSeen, e.Action)
	}
	want := "start_signup create_organization create_project open_billing_setup approve_signup sign_in card_declined add_payment_method complete_signup create_key claim_signup"
	if got := strings.Join(actionsSeen, " "); got != want {
		t.Fatalf("ledger actions:\n got %s\nwant %s", got, want)
	}
}

func TestSignupExpires(t *testing.T) {
	clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	ts := start(t, server.Config{Now: clock.Now, RateLimits: generous})
	data := ts.Client.Do("POST", "/v1/signup", nil, nil).JSON()["data"].(map[string]any)
	clock.Advance(service.SignupTTL)
	_, polled := pollSignup(ts, data["signupSessionId"].(string), data["claimSecret"].(string))
	if polled["data"].(map[string]any)["state"] != "expired" || polled["actions"].([]any)[0].(map[string]any)["tool"] != "create_signup" {
		t.Fatalf("expired: %v", polled)
	}
	if p := newBrowser(t, ts).get(data["reviewUrl"].(string)); p.status != 409 || !strings.Contains(p.body, "expired") {
		t.Fatalf("expired review page: %d", p.status)
	}
}

func TestBillingSetupLink(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 30_000_000, service.DefaultPolicy(), "read", "quote")
		other := newAccount(t, ts, 10_000_000, service.DefaultPolicy(), "read")

		r := ts.Client.Do("POST", "/v1/billing/setup-link", map[string]any{}, a.header())
		if r.StatusCode != 201 {
			t.Fatalf("setup link: %d %s", r.StatusCode, r.Body)
		}
		d := r.JSON()["data"].(map[string]any)
		if d["budgetRemainingUsd"] != 30.0 || d["receipt"].(map[string]any)["action"] != "create_billing_setup_link" || d["undo"].(map[string]any)["irreversible"] != true {
			t.Fatalf("mutation parts: %v", d)
		}
		id, secret, setupURL := d["setupSessionId"].(string), d["pollSecret"].(string), d["setupUrl"].(string)
		poll := func(key account, id, secret string) (int, map[string]any) {
			r := ts.Client.Do("POST", "/v1/billing/poll", map[string]any{"setupSessionId": id, "pollSecret": secret}, key.header())
			return r.StatusCode, r.JSON()
		}
		if st, p := poll(a, id, secret); st != 200 || p["data"].(map[string]any)["state"] != "pending" {
			t.Fatalf("pending: %d %v", st, p)
		}
		// Bound to its secret and to its organisation.
		s1, wrong := poll(a, id, "nope")
		s2, foreign := poll(other, id, secret)
		if s1 != 404 || s2 != 404 || wrong["message"] != foreign["message"] {
			t.Fatalf("wrong secret %d, other org %d", s1, s2)
		}
		// The card page needs a human of that organisation.
		if p := newBrowser(t, ts).get(setupURL); p.status != 401 || strings.Contains(p.body, id) {
			t.Fatalf("card page without a session: %d", p.status)
		}
		if p := signIn(t, ts, other.org).get(setupURL); p.status != 404 {
			t.Fatalf("card page, other org: %d", p.status)
		}
		b := signIn(t, ts, a.org)
		p := b.get(setupURL)
		p = b.post(setupURL, url.Values{"csrf": {csrfOf(t, p)}, "number": {"4000000000009995"}, "expiry": {"01/31"}, "cvc": {"123"}})
		if p.status != 402 || !strings.Contains(p.body, "insufficient funds") {
			t.Fatalf("insufficient funds: %d", p.status)
		}
		if _, p := poll(a, id, secret); p["data"].(map[string]any)["state"] != "declined" {
			t.Fatalf("after decline: %v", p)
		}
		p = b.post(setupURL, url.Values{"csrf": {csrfOf(t, p)}, "number": {"5555 5555 5555 4444"}, "expiry": {"01/31"}, "cvc": {"123"}})
		if p.status != 200 {
			t.Fatalf("good card: %d %s", p.status, p.body)
		}
		if _, p := poll(a, id, secret); p["data"].(map[string]any)["state"] != "complete" {
			t.Fatalf("after card: %v", p)
		}
		if p := b.get("/dashboard"); !strings.Contains(p.body, "mastercard •••• 4444") {
			t.Fatal("dashboard does not show the card")
		}
	})
}

func TestKeysPage(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read")
	b := signIn(t, ts, a.org)
	p := b.get("/keys")
	token := csrfOf(t, p)
	p = b.post("/keys", url.Values{"csrf": {token}, "name": {"deployer"}, "scope_read": {"1"}, "scope_quote": {"1"}})
	m := regexp.MustCompile(`agk_[A-Za-z0-9_-]+`).FindString(p.body)
	if p.status != 201 || m == "" {
		t.Fatalf("create: %d", p.status)
	}
	if strings.Contains(b.get("/keys").body, m) || strings.Contains(b.get("/dashboard").body, m) {
		t.Fatal("the secret was shown twice")
	}
	h := http.Header{"Authorization": {"Bearer " + m}}
	name := availableDomains(1, "dev", "keys")[0]
	q := ts.Client.Do("POST", "/v1/quotes", domainQuote(a.project, name, 1), h).JSON()["data"].(map[string]any)
	if len(q["gatedSteps"].([]any)) != 1 {
		t.Fatalf("without buy_domain the purchase is gated: %v", q)
	}
	keyID := regexp.MustCompile(`key_[a-z2-7]+`).FindString(strings.Split(p.body, "Your new key")[1])
	if p := b.post("/keys/"+keyID+"/grant", url.Values{"csrf": {token}, "scope": {"buy_domain"}}); p.status != 200 {
		t.Fatalf("grant: %d %s", p.status, p.body)
	}
	q = ts.Client.Do("POST", "/v1/quotes", domainQuote(a.project, availableDomains(2, "dev", "keys")[1], 1), h).JSON()["data"].(map[string]any)
	if len(q["gatedSteps"].([]any)) != 0 {
		t.Fatalf("buy_domain skips the gate from the next request: %v", q)
	}
	if p := b.post("/keys/"+keyID+"/revoke", url.Values{"csrf": {token}}); p.status != 200 {
		t.Fatalf("revoke: %d", p.status)
	}
	if r := ts.Client.Do("GET", "/v1/projects", nil, h); r.StatusCode != 401 {
		t.Fatalf("revoked key on the next request: %d", r.StatusCode)
	}
	// Unknown scopes and foreign keys are refused.
	if p := b.post("/keys/"+a.keyID+"/grant", url.Values{"csrf": {token}, "scope": {"admin"}}); p.status != 400 {
		t.Fatalf("unknown scope: %d", p.status)
	}
	other := newAccount(t, ts, 1, service.DefaultPolicy(), "read")
	if p := b.post("/keys/"+other.keyID+"/revoke", url.Values{"csrf": {token}}); p.status != 404 {
		t.Fatalf("foreign key: %d", p.status)
	}
}

func TestSignInLinks(t *testing.T) {
	clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	ts := start(t, server.Config{Now: clock.Now})
	a := newAccount(t, ts, 1_000_000, service.DefaultPolicy(), "read")
	ctx := context.Background()

	link, _, err := ts.Service().Accounts.LocalOperatorSignIn(ctx, a.org, "")
	if err != nil {
		t.Fatal(err)
	}
	// spend opens a link as a person does: the confirm page, then its button.
	spend := func(b *browser, link string) page {
		t.Helper()
		confirm := b.get(link)
		if confirm.status != 200 {
			return confirm
		}
		return b.post(link, url.Values{"csrf": {csrfOf(t, confirm)}})
	}
	// A link scanner's GETs, and a POST without the confirm page's token,
	// spend nothing.
	for range 3 {
		if p := newBrowser(t, ts).get(link); p.status != 200 || !strings.Contains(p.body, "Sign in to Pier") || p.header.Get("Set-Cookie") != "" && strings.Contains(p.header.Get("Set-Cookie"), "pier_session=") {
			t.Fatalf("GET of the link: %d", p.status)
		}
	}
	if p := newBrowser(t, ts).post(link, url.Values{}); p.status != 403 {
		t.Fatalf("POST without the form token: %d", p.status)
	}
	b := newBrowser(t, ts)
	p := spend(b, link)
	if p.status != 303 {
		t.Fatalf("first use: %d", p.status)
	}
	c := strings.Join(p.header.Values("Set-Cookie"), "\n")
	if !strings.Contains(c, "pier_session=") || !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Lax") {
		t.Fatalf("cookie %q", c)
	}
	if p := spend(newBrowser(t, ts), link); p.status != 401 || !strings.Contains(p.body, "What to do") {
		t.Fatalf("second use: %d", p.status)
	}
	// An expired link does nothing.
	late, _, _ := ts.Service().Accounts.LocalOperatorSignIn(ctx, a.org, "")
	clock.Advance(service.SignInTTL)
	if p := spend(newBrowser(t, ts), late); p.status != 401 {
		t.Fatalf("expired link: %d", p.status)
	}
	// A page asked for before signing in is where the link lands.
	nb := newBrowser(t, ts)
	if p := nb.get("/keys"); p.status != 401 {
		t.Fatalf("keys without a session: %d", p.status)
	}
	fresh, _, _ := ts.Service().Accounts.LocalOperatorSignIn(ctx, a.org, "")
	if p := spend(nb, fresh); p.location != "/keys" {
		t.Fatalf("landed on %q", p.location)
	}
	// Sign-out ends the session server-side.
	p = nb.get("/dashboard")
	if p.status != 200 {
		t.Fatalf("dashboard: %d", p.status)
	}
	if p := nb.post("/signout", url.Values{"csrf": {csrfOf(t, p)}}); p.status != 200 {
		t.Fatalf("sign out: %d", p.status)
	}
	if p := nb.get("/dashboard"); p.status != 401 {
		t.Fatalf("after sign-out: %d", p.status)
	}
	// Redirects stay on this site.
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example"} {
		if service.SafeNext(next) != "" {
			t.Errorf("%q accepted as a landing page", next)
		}
	}
}

// TestIdenticalSignupsDeduplicate: SPEC §7 rule 2 gives onboarding its own
// deduplication, with no Idempotency-Key: the same signup sent twice by the
// same caller answers the same session; another email starts another.
func TestIdenticalSignupsDeduplicate(t *testing.T) {
	ts := start(t, server.Config{RateLimits: generous})
	signup := func(email string) map[string]any {
		r := ts.Client.Do("POST", "/v1/signup", map[string]any{"email": email, "organizationName": "Twice"}, nil)
		if r.StatusCode != 201 {
			t.Fatalf("signup: %d %s", r.StatusCode, r.Body)
		}
		return r.JSON()["data"].(map[string]any)
	}
	a, b, c := signup("twice@example.com"), signup("twice@example.com"), signup("other@example.com")
	if a["signupSessionId"] != b["signupSessionId"] || a["claimSecret"] != b["claimSecret"] || a["reviewUrl"] != b["reviewUrl"] {
		t.Errorf("the same signup twice started two sessions: %v %v", a["signupSessionId"], b["signupSessionId"])
	}
	if c["signupSessionId"] == a["signupSessionId"] {
		t.Error("another email answered the first session")
	}
}
