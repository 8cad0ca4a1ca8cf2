package service

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// The harness builds the domain layer as server.build does, over a real
// SQLite store in a temporary directory, the sandbox registrar and payment
// provider (which are pure code), and fakes only for the ports that reach
// outside the process: the platform (task queue, edge, CA, DNS listener),
// the process runtime, the PostgreSQL add-on and the SMTP relay.

// epoch is when every harness clock starts.
var epoch = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

// fakeClock is the service's injected clock; tests move it by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fakePlatform queues enqueued tasks for the test to run, records what
// was invalidated, and answers the HTTPS and DNS checks as told.
type fakePlatform struct {
	mu          sync.Mutex
	queue       []string
	hosts       []string
	zones       []string
	certs       []string
	httpsErr    error
	dnsErr      error
	enqueueErr  error
	httpsChecks int
}

func (p *fakePlatform) Enqueue(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, id)
	return p.enqueueErr
}

func (p *fakePlatform) InvalidateHosts(h ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hosts = append(p.hosts, h...)
}

func (p *fakePlatform) InvalidateZone(d string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.zones = append(p.zones, d)
}

func (p *fakePlatform) Certificate(h string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.certs = append(p.certs, h)
	return nil
}

func (p *fakePlatform) VerifyHTTPS(context.Context, string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.httpsChecks++
	return p.httpsErr
}

func (p *fakePlatform) Ports() (string, string) { return "8080", "8443" }

func (p *fakePlatform) VerifyDNS(context.Context, string, string, string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dnsErr
}

func (p *fakePlatform) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue = nil
	return q
}

// fakeRuntime "runs" versions without starting anything: Start answers an
// address nobody listens on, or the error it was told.
type fakeRuntime struct {
	mu         sync.Mutex
	running    map[RunningVersion]RunSpec
	startErr   error
	sandboxErr error
	starts     int
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{running: map[RunningVersion]RunSpec{}} }

func (r *fakeRuntime) Start(_ context.Context, spec RunSpec) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	if r.startErr != nil {
		return "", r.startErr
	}
	r.running[RunningVersion{spec.ServiceID, spec.Version}] = spec
	if spec.Worker {
		return "", nil
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(20000+spec.Version)), nil
}

func (r *fakeRuntime) Stop(_ context.Context, id string, v int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, RunningVersion{id, v})
	return nil
}

func (r *fakeRuntime) Running() []RunningVersion {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []RunningVersion
	for rv := range r.running {
		out = append(out, rv)
	}
	return out
}

func (r *fakeRuntime) ID() string { return "runner-test" }

func (r *fakeRuntime) Sandbox() (Sandbox, error) {
	if r.sandboxErr != nil {
		return Sandbox{}, r.sandboxErr
	}
	return Sandbox{Isolation: "runc", MemoryBytes: 256 << 20, CPUMillis: 500, Processes: 64, Egress: true}, nil
}

func (r *fakeRuntime) spec(id string, v int) (RunSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.running[RunningVersion{id, v}]
	return s, ok
}

// fakeDatabases is the PostgreSQL add-on kept in memory.
type fakeDatabases struct {
	mu  sync.Mutex
	dbs map[string]string
}

func (d *fakeDatabases) Create(_ context.Context, name, password string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dbs == nil {
		d.dbs = map[string]string{}
	}
	d.dbs[name] = password
	return nil
}

func (d *fakeDatabases) URL(name, password string) string {
	return "postgres://" + name + ":" + password + "@db.test/" + name
}
func (d *fakeDatabases) Endpoint() (string, string) { return "tcp", "127.0.0.1:5432" }
func (d *fakeDatabases) URLAt(name, password, addr string) string {
	return "postgres://" + name + ":" + password + "@" + addr + "/" + name
}
func (d *fakeDatabases) Dump(_ context.Context, name string) ([]byte, error) {
	return []byte("-- dump of " + name + "\n"), nil
}
func (d *fakeDatabases) Drop(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.dbs, name)
	return nil
}

// fakeRelay records what it was asked to send.
type fakeRelay struct {
	mu   sync.Mutex
	sent []string // recipients
	msgs []string
	err  error
}

func (r *fakeRelay) Send(_ context.Context, _ string, to []string, msg []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.sent = append(r.sent, to...)
	r.msgs = append(r.msgs, string(msg))
	return nil
}
func (r *fakeRelay) Name() string { return "relay.test" }

// harness is one service over one store.
type harness struct {
	t        *testing.T
	ctx      context.Context
	st       *store.Store
	svc      *Service
	clock    *fakeClock
	platform *fakePlatform
	runtime  *fakeRuntime
	dbs      *fakeDatabases
	relay    *fakeRelay
}

// option changes the Config a harness builds with.
type option func(*Config)

func withoutRuntime(c *Config) { c.Runtime = nil }
func withoutRelay(c *Config)   { c.Relay = nil }
func withoutDBs(c *Config)     { c.Databases = nil }
func withInboxBytes(n int64) option {
	return func(c *Config) { c.InboxBytes = n }
}
func withQuotas(q Quotas) option {
	return func(c *Config) { c.Quotas = q }
}
func withPrices(p registrar.PriceList) option {
	return func(c *Config) { c.Prices = p }
}

func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &harness{t: t, ctx: ctx, st: st, clock: &fakeClock{now: epoch}, platform: &fakePlatform{},
		runtime: newFakeRuntime(), dbs: &fakeDatabases{}, relay: &fakeRelay{}}
	cfg := Config{
		Store: st, Now: h.clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BaseURL:  func() string { return "https://pier.test" },
		Platform: h.platform, PreviewDomain: "preview.test",
		Zone:    zone.ZoneConfig{EdgeIPv4: net.ParseIP("192.0.2.1"), EdgeIPv6: net.ParseIP("2001:db8::1")},
		Runtime: h.runtime, Databases: h.dbs, Relay: h.relay, Drain: time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	h.svc = New(cfg)
	return h
}

// tenant is an organisation with one project, a human, and an agent key.
type tenant struct {
	org     string
	project string
	human   Human
	agent   *auth.Principal
}

// tenant makes an organisation with a project of the given budget (USD)
// and policy, a person, and an agent key with scopes (read, quote, launch
// when none are given).
func (h *harness) tenant(budgetUSD int64, pol ProjectPolicy, scopes ...string) tenant {
	h.t.Helper()
	if len(scopes) == 0 {
		scopes = SignupScopes
	}
	orgID, userID := auth.ID("org"), auth.ID("usr")
	err := h.st.InTx(h.ctx, func(tx *store.Tx) error {
		if _, err := tx.Accounts().CreateOrganization(h.ctx, orgID, "Org "+orgID[len(orgID)-4:], epoch); err != nil {
			return err
		}
		return tx.Accounts().CreateHuman(h.ctx, store.Human{ID: userID, OrgID: orgID, Kind: "person", Name: "Ada", Email: "ada@example.org", CreatedAt: epoch})
	})
	h.must(err)
	hu := Human{OrgID: orgID, UserID: userID}
	p, err := h.svc.Projects.Create(h.ctx, NewProject{OrgID: orgID, Name: "main", LimitMicro: money.MicroUSD(budgetUSD * 1_000_000), Policy: pol, CreatedBy: "human:" + userID})
	h.must(err)
	_, k, err := h.svc.Accounts.CreateKey(h.ctx, hu, "agent", scopes)
	h.must(err)
	return tenant{org: orgID, project: p.ID, human: hu,
		agent: &auth.Principal{Kind: "agent", OrgID: orgID, KeyID: k.ID, Scopes: k.Scopes, Caller: "key:" + k.ID}}
}

// policy is DefaultPolicy changed by fn.
func policy(fn func(*ProjectPolicy)) ProjectPolicy {
	p := DefaultPolicy()
	if fn != nil {
		fn(&p)
	}
	return p
}

func (h *harness) must(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// drain runs every enqueued task, and those the runs enqueue, to rest.
func (h *harness) drain() {
	h.t.Helper()
	for range 20 {
		q := h.platform.take()
		if len(q) == 0 {
			return
		}
		for _, id := range q {
			h.must(h.svc.Launches.RunTask(h.ctx, id))
		}
	}
	h.t.Fatal("tasks kept enqueueing each other")
}

// task reads a task of the org.
func (h *harness) task(org, id string) *Task {
	h.t.Helper()
	v, err := h.svc.Tasks.Get(h.ctx, org, id)
	h.must(err)
	return v
}

// remaining is what a project has left, in micro-USD, from the store.
func (h *harness) remaining(org, project string) int64 {
	h.t.Helper()
	p, err := h.st.Projects().Get(h.ctx, org, project)
	h.must(err)
	return int64(p.LimitMicro - p.SpentMicro - p.HeldMicro)
}

// books checks that a project's books never overspend: spent plus held
// stays within the limit, and neither is negative.
func (h *harness) books(org, project string) {
	h.t.Helper()
	p, err := h.st.Projects().Get(h.ctx, org, project)
	h.must(err)
	if p.SpentMicro < 0 || p.HeldMicro < 0 || p.SpentMicro+p.HeldMicro > p.LimitMicro {
		h.t.Fatalf("books overspent: limit %d spent %d held %d", p.LimitMicro, p.SpentMicro, p.HeldMicro)
	}
}

// wantCode fails unless err is an *apierr.Error with code.
func wantCode(t *testing.T, err error, code models.BlockedBy) *apierr.Error {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) {
		t.Fatalf("want %s, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want %s, got %s: %s", code, e.Code, e.Message)
	}
	return e
}

// names renders actions as short strings (actions.Names).
func names(acts []models.Action) []string { return actions.Names(acts) }

// hasAction reports whether acts name want (as names renders it).
func hasAction(acts []models.Action, want string) bool {
	for _, n := range names(acts) {
		if n == want {
			return true
		}
	}
	return false
}

// freeDomain is an available name of at least four letters under tld,
// starting from seed: the sandbox registrar's availability is a pure
// function of the name.
func freeDomain(t *testing.T, seed, tld string) string {
	t.Helper()
	tl, ok := registrar.Lookup(tld)
	if !ok {
		t.Fatalf("no TLD %s", tld)
	}
	for i := range 200 {
		label := fmt.Sprintf("%s%d", seed, i)
		if registrar.Check(label, tl).Available {
			return label + "." + tld
		}
	}
	t.Fatalf("no free name for %s", seed)
	return ""
}

// takenDomain is a name the registrar's catalog says is registered.
func takenDomain(t *testing.T, tld string) string {
	t.Helper()
	tl, _ := registrar.Lookup(tld)
	for i := range 500 {
		label := fmt.Sprintf("gone%d", i)
		if !registrar.Check(label, tl).Available {
			return label + "." + tld
		}
	}
	t.Fatal("no taken name")
	return ""
}

// site uploads an inline bundle of files (path → content) and returns its id.
func (h *harness) site(tn tenant, files map[string]string) string {
	h.t.Helper()
	var fs []InlineFile
	for p, c := range files {
		fs = append(fs, InlineFile{Path: p, ContentBase64: base64.StdEncoding.EncodeToString([]byte(c))})
	}
	b, err := h.svc.Bundles.Upload(h.ctx, tn.agent, UploadRequest{ProjectID: tn.project, Files: fs})
	h.must(err)
	return b.ID
}

func shaOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// quote creates a quote and fails on error.
func (h *harness) quote(tn tenant, items ...QuoteItem) *Quote {
	h.t.Helper()
	q, err := h.svc.Quotes.Create(h.ctx, tn.agent, QuoteRequest{ProjectID: tn.project, Items: items})
	h.must(err)
	return q
}

func domainItem(d string) QuoteItem {
	return QuoteItem{Kind: ItemDomain, Domain: d}
}

func serviceItem(workload, target, name string) QuoteItem {
	return QuoteItem{Kind: ItemService, Workload: workload, Target: target, Name: name}
}

func emailItem(d string) QuoteItem {
	return QuoteItem{Kind: ItemEmail, Domain: d}
}

// edge launches a static site and runs its task.
func (h *harness) edge(tn tenant, name string, req LaunchRequest) *Task {
	h.t.Helper()
	if req.BundleID == "" {
		req.BundleID = h.site(tn, map[string]string{"index.html": "<h1>" + name + "</h1>"})
	}
	req.Name, req.Target = name, "edge"
	v, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, req)
	h.must(err)
	h.drain()
	return h.task(tn.org, v.ID)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// buy launches an edge site on a new domain for a tenant whose key holds
// buy_domain, and returns the launch task.
func (h *harness) buy(tn tenant, name, domain string) *Task {
	h.t.Helper()
	q := h.quote(tn, domainItem(domain))
	if q.Decision != QuoteAllow {
		h.t.Fatalf("quote for %s: %s %v", domain, q.Decision, q.Reasons)
	}
	return h.edge(tn, name, LaunchRequest{Domain: domain, QuoteID: q.ID})
}

// mailDomain buys a domain for a tenant (whose key holds buy_domain) and
// sets its mail up, returning the domain.
func (h *harness) mailDomain(tn tenant, seed string) string {
	h.t.Helper()
	dom := freeDomain(h.t, seed, "dev")
	h.buy(tn, seed, dom)
	q := h.quote(tn, emailItem(dom))
	v, err := h.svc.Mail.Setup(h.ctx, tn.agent, dom, q.ID)
	h.must(err)
	h.drain()
	if got := h.task(tn.org, v.ID); got.State != "succeeded" {
		h.t.Fatalf("mail setup %s: %+v", got.State, got.Steps)
	}
	return dom
}

// sleepABit yields to goroutines the service started, for tests that
// wait on them.
func sleepABit() { time.Sleep(5 * time.Millisecond) }
