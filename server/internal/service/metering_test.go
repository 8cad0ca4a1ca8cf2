package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// meterClock is a clock the test moves.
type meterClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *meterClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *meterClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// mailbox is a relay that keeps what it is given.
type mailbox struct {
	mu   sync.Mutex
	sent []string
}

func (m *mailbox) Send(_ context.Context, _ string, to []string, msg []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, strings.Join(to, ",")+"\n"+string(msg))
	return nil
}
func (m *mailbox) Name() string { return "test" }

func (m *mailbox) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

type meterWorld struct {
	t     *testing.T
	st    *store.Store
	svc   *Service
	clock *meterClock
	mail  *mailbox
	org   string
	proj  string
}

func usdMicro(dollars float64) money.MicroUSD { return money.MicroUSD(dollars * 1e6) }

// newMeterWorld is an organisation with a human and one project whose
// budget is limit, on SQLite (databaseURL empty) or PostgreSQL.
func newMeterWorld(t *testing.T, databaseURL string, start time.Time, limit money.MicroUSD, period BudgetPeriod) *meterWorld {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := &meterWorld{t: t, st: st, clock: &meterClock{now: start}, mail: &mailbox{}, org: "org_meter"}
	w.svc = New(Config{Store: st, Now: w.clock.Now, Relay: w.mail, BaseURL: func() string { return "https://pier.example" }})
	if _, err := st.Accounts().CreateOrganization(ctx, w.org, "meter", start); err != nil {
		t.Fatal(err)
	}
	if err := st.Accounts().CreateHuman(ctx, store.Human{ID: "hum_meter", OrgID: w.org, Kind: "person", Name: "Ada", Email: "ada@example.org", CreatedAt: start}); err != nil {
		t.Fatal(err)
	}
	pol := DefaultPolicy()
	pol.BudgetPeriod = period
	p, err := w.svc.Projects.Create(ctx, NewProject{OrgID: w.org, Name: "shop", LimitMicro: limit, Policy: pol, CreatedBy: "human:hum_meter"})
	if err != nil {
		t.Fatal(err)
	}
	w.proj = p.ID
	return w
}

// launched records a process service that went live at at, as a launch
// leaves it: its version with add-ons, the launch task that prepaid
// prepaid, and the money that launch moved.
func (w *meterWorld) launched(name string, at time.Time, prepaid money.MicroUSD, addons ...string) string {
	w.t.Helper()
	ctx := context.Background()
	id, task := "svc_"+name, "tsk_"+name
	if err := w.st.Services().Insert(ctx, store.Service{ID: id, OrgID: w.org, ProjectID: w.proj, Name: name, Target: "process",
		PreviewHost: name + ".localhost", BundleID: "bun_x", State: "launching", TaskID: task, CreatedAt: at, UpdatedAt: at}); err != nil {
		w.t.Fatal(err)
	}
	spec, _ := json.Marshal(versionSpec{Run: "app", Addons: addons})
	if err := w.st.ServiceVersions().Insert(ctx, store.ServiceVersion{ServiceID: id, OrgID: w.org, Number: 1, BundleID: "bun_x", Spec: string(spec), State: "serving", TaskID: task, CreatedAt: at}); err != nil {
		w.t.Fatal(err)
	}
	if err := w.st.ServiceRuns().Serve(ctx, id, 1, "bun_x", "127.0.0.1:1", "run_x", at); err != nil {
		w.t.Fatal(err)
	}
	pl, _ := json.Marshal(launchPayload{ServiceID: id, ProjectID: w.proj, ChargedMicro: prepaid, placement: placement{Target: "process"}})
	if err := w.st.Tasks().Insert(ctx, store.Task{ID: task, OrgID: w.org, ProjectID: w.proj, Kind: "launch", State: "succeeded", Steps: "[]", Payload: string(pl), CreatedAt: at, UpdatedAt: at}); err != nil {
		w.t.Fatal(err)
	}
	if prepaid > 0 {
		if err := w.st.InTx(ctx, func(tx *store.Tx) error { return tx.Projects().MoveMoney(ctx, w.proj, 0, prepaid) }); err != nil {
			w.t.Fatal(err)
		}
	}
	return id
}

// resized puts a new version with other add-ons live at the clock's time.
func (w *meterWorld) resized(id string, number int, addons ...string) {
	w.t.Helper()
	ctx := context.Background()
	spec, _ := json.Marshal(versionSpec{Run: "app", Addons: addons})
	now := w.clock.Now()
	if err := w.st.ServiceVersions().Insert(ctx, store.ServiceVersion{ServiceID: id, OrgID: w.org, Number: number, BundleID: "bun_x", Spec: string(spec), State: "serving", TaskID: "tsk_x", CreatedAt: now}); err != nil {
		w.t.Fatal(err)
	}
	if err := w.st.ServiceRuns().Serve(ctx, id, number, "bun_x", "127.0.0.1:1", "run_x", now); err != nil {
		w.t.Fatal(err)
	}
}

// tornDown retires a service at the clock's time, as teardown does.
func (w *meterWorld) tornDown(id string) {
	w.t.Helper()
	if err := w.st.Services().Retire(context.Background(), id, "torn_down", w.clock.Now()); err != nil {
		w.t.Fatal(err)
	}
}

// pass runs the meter at t.
func (w *meterWorld) pass(t time.Time) {
	w.t.Helper()
	w.clock.Set(t)
	if err := w.svc.Metering().MeterPass(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

func (w *meterWorld) project() store.Project {
	w.t.Helper()
	p, err := w.st.Projects().Get(context.Background(), w.org, w.proj)
	if err != nil {
		w.t.Fatal(err)
	}
	return p
}

func (w *meterWorld) charges() map[string]store.MeterCharge {
	w.t.Helper()
	cs, err := w.st.Meters().Charges(context.Background(), w.proj)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]store.MeterCharge{}
	for _, c := range cs {
		k := c.ServiceID + "@" + c.Period
		if _, dup := out[k]; dup {
			w.t.Fatalf("%s charged twice", k)
		}
		out[k] = c
	}
	return out
}

// verified checks the organisation's ledger chain and counts its actions.
func (w *meterWorld) verified() map[string]int {
	w.t.Helper()
	entries, err := w.st.Ledger().Entries(context.Background(), w.org, 0, 10000)
	if err != nil {
		w.t.Fatal(err)
	}
	if broken := ledger.Verify(entries); broken != nil {
		w.t.Fatalf("ledger: %+v", broken)
	}
	n := map[string]int{}
	for _, e := range entries {
		n[e.Action]++
	}
	return n
}

func day(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }

// perHours is ceil(monthly × hours / monthHours), the meter's arithmetic.
func perHours(monthly money.MicroUSD, hours, monthHours int64) money.MicroUSD {
	return money.MicroUSD((int64(monthly)*hours + monthHours - 1) / monthHours)
}

// A process service launched mid-month with its first month prepaid is
// metered by the hour: November's half month and December's whole month
// draw the prepayment first, then the budget; its teardown in January
// charges January's hours at once. Each (service, month) is charged once,
// however many passes run.
func TestMeterProratesLaunchTeardownAndPeriods(t *testing.T) {
	w := newMeterWorld(t, "", day(2026, 11, 16, 0), usdMicro(100), BudgetLifetime)
	svc := w.launched("app", day(2026, 11, 16, 0), usdMicro(7))

	w.pass(day(2026, 11, 20, 0))
	if got := w.charges(); len(got) != 0 {
		t.Fatalf("charged before November ended: %v", got)
	}
	for range 3 {
		w.pass(day(2026, 12, 1, 0).Add(30 * time.Minute))
	}
	nov := w.charges()[svc+"@2026-11"]
	if nov.Hours != 360 || nov.UsageMicro != usdMicro(3.5) || nov.CreditMicro != usdMicro(3.5) || nov.AmountMicro != 0 {
		t.Fatalf("November: %+v, want 360 h, 3.50 used, all prepaid", nov)
	}
	w.pass(day(2027, 1, 1, 0))
	dec := w.charges()[svc+"@2026-12"]
	if dec.Hours != 744 || dec.UsageMicro != usdMicro(7) || dec.CreditMicro != usdMicro(3.5) || dec.AmountMicro != usdMicro(3.5) {
		t.Fatalf("December: %+v, want a whole month, 3.50 of it prepaid", dec)
	}
	w.clock.Set(day(2027, 1, 11, 0))
	w.tornDown(svc)
	w.pass(day(2027, 1, 11, 0).Add(time.Minute))
	w.pass(day(2027, 2, 1, 0))
	jan := w.charges()[svc+"@2027-01"]
	if want := perHours(usdMicro(7), 240, 744); jan.Hours != 240 || jan.AmountMicro != want {
		t.Fatalf("January: %+v, want 240 h for %d", jan, want)
	}
	if got := w.charges(); len(got) != 3 {
		t.Fatalf("%d charges, want 3", len(got))
	}
	if got, want := w.project().SpentMicro, usdMicro(7)+usdMicro(3.5)+jan.AmountMicro; got != want {
		t.Fatalf("spent %d, want %d", got, want)
	}
	if n := w.verified(); n["meter_charge"] != 3 || n["meter_started"] != 1 || n["meter_stopped"] != 1 {
		t.Fatalf("ledger actions %v", n)
	}
}

// A service that gains the managed PostgreSQL add-on mid-month pays each
// price for the hours it ran at it.
func TestMeterResizeProrates(t *testing.T) {
	w := newMeterWorld(t, "", day(2026, 12, 1, 0), usdMicro(100), BudgetLifetime)
	svc := w.launched("app", day(2026, 12, 1, 0), 0)
	w.pass(day(2026, 12, 1, 0).Add(time.Minute))
	w.clock.Set(day(2026, 12, 11, 0))
	w.resized(svc, 2, "managed_postgres")
	w.pass(day(2026, 12, 11, 0))
	w.pass(day(2027, 1, 1, 0))
	dec := w.charges()[svc+"@2026-12"]
	want := perHours(usdMicro(7), 240, 744) + perHours(usdMicro(22), 504, 744)
	if dec.Hours != 744 || dec.AmountMicro != want {
		t.Fatalf("December: %+v, want 744 h for %d", dec, want)
	}
	if n := w.verified(); n["meter_resized"] != 1 {
		t.Fatalf("ledger actions %v", n)
	}
}

// A monthly budget starts again each month: the month closes with what it
// spent (the meter's charge for it included), spending returns to zero,
// and the notices of the new month are the new month's.
func TestMonthlyBudgetRollsOverAndNoticesOncePerPeriod(t *testing.T) {
	w := newMeterWorld(t, "", day(2026, 11, 1, 0), usdMicro(10), BudgetMonthly)
	svc := w.launched("app", day(2026, 11, 1, 0), usdMicro(7))
	for range 2 {
		w.pass(day(2026, 11, 2, 0))
	}
	if n := w.verified(); n["budget_notice"] != 1 {
		t.Fatalf("7 of 10 spent: %d notices, want the 50 %% one", n["budget_notice"])
	}
	if w.mail.count() != 1 || !strings.Contains(w.mail.sent[0], "ada@example.org") || !strings.Contains(w.mail.sent[0], "50%") {
		t.Fatalf("mails: %q", w.mail.sent)
	}
	w.pass(day(2026, 12, 1, 0))
	p := w.project()
	if p.SpentMicro != 0 {
		t.Fatalf("December starts with %d spent", p.SpentMicro)
	}
	closed, err := w.st.Meters().LastClosedPeriod(context.Background(), w.proj)
	if err != nil || closed != "2026-11" {
		t.Fatalf("last closed period %q, %v", closed, err)
	}
	// December's whole month is 7 USD of a 10 USD budget, charged in January
	// against December before December closes.
	w.pass(day(2027, 1, 1, 0))
	if c := w.charges()[svc+"@2026-12"]; c.AmountMicro != usdMicro(7) {
		t.Fatalf("December: %+v", c)
	}
	notices, _ := w.st.Meters().Notices(context.Background(), w.proj, "2026-12")
	if len(notices) != 1 || notices[0].Percent != 50 {
		t.Fatalf("December notices %+v", notices)
	}
	if w.mail.count() != 2 {
		t.Fatalf("%d mails, want one per period", w.mail.count())
	}
	if n := w.verified(); n["budget_period_closed"] != 2 {
		t.Fatalf("ledger actions %v", n)
	}
}

// At 100 % the budget refuses new spending with budget:exhausted, carrying
// the way to a raise; usage the budget cannot cover is recorded unpaid,
// never over the limit. The project's view shows the period, what is
// accrued and the forecast.
func TestExhaustedBudgetRefusesNewSpending(t *testing.T) {
	w := newMeterWorld(t, "", day(2026, 11, 1, 0), usdMicro(10), BudgetLifetime)
	svc := w.launched("app", day(2026, 11, 1, 0), 0, "managed_postgres") // 22 USD a month
	w.pass(day(2026, 11, 16, 0))
	v, err := w.svc.Projects.Get(context.Background(), w.org, w.proj)
	if err != nil {
		t.Fatal(err)
	}
	if v.Period.Kind != BudgetLifetime || v.Period.Accrued != usdMicro(11) || v.Period.Forecast != usdMicro(22) {
		t.Fatalf("period view %+v, want 11 accrued and 22 forecast", v.Period)
	}
	w.pass(day(2026, 12, 1, 0))
	c := w.charges()[svc+"@2026-11"]
	if c.UsageMicro != usdMicro(22) || c.AmountMicro != usdMicro(10) || c.UnpaidMicro != usdMicro(12) {
		t.Fatalf("November: %+v, want 10 charged and 12 unpaid", c)
	}
	if p := w.project(); p.SpentMicro != p.LimitMicro {
		t.Fatalf("spent %d of %d", p.SpentMicro, p.LimitMicro)
	}
	notices, _ := w.st.Meters().Notices(context.Background(), w.proj, "lifetime")
	if len(notices) != 3 {
		t.Fatalf("notices %+v, want 50, 80 and 100", notices)
	}
	_, err = w.svc.Quotes.Create(context.Background(), &auth.Principal{Kind: "agent", OrgID: w.org, KeyID: "key_x", Scopes: []string{"quote"}},
		QuoteRequest{ProjectID: w.proj, Items: []QuoteItem{{Kind: ItemService, Workload: "dynamic_service", Target: "process", Months: 1}}})
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != "budget:exhausted" || e.Retryable() || e.Status() != 402 {
		t.Fatalf("quote on an exhausted budget: %v", err)
	}
	if len(e.Actions) == 0 || !strings.Contains(mustJSON(e.Actions), "request_budget_raise") {
		t.Fatalf("actions %s", mustJSON(e.Actions))
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// Two replicas on one PostgreSQL run the meter's pass at once, over and
// over: every (service, month) is charged once and the money moves once.
func TestMeterPassRacesAcrossReplicas(t *testing.T) {
	db := testpg.NewDatabase(t)
	w := newMeterWorld(t, db, day(2026, 10, 10, 0), usdMicro(1000), BudgetLifetime)
	var ids []string
	for _, n := range []string{"a", "b", "c"} {
		ids = append(ids, w.launched(n, day(2026, 10, 10, 0), 0))
	}
	other, err := store.Open(context.Background(), t.TempDir(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	replica := New(Config{Store: other, Now: w.clock.Now, Relay: w.mail, BaseURL: func() string { return "https://pier.example" }})
	w.clock.Set(day(2027, 1, 2, 0))
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := w.svc
			if i%2 == 1 {
				s = replica
			}
			errs <- s.Metering().MeterPass(context.Background())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := w.charges()
	if len(got) != 9 {
		t.Fatalf("%d charges, want 3 services × 3 months", len(got))
	}
	var sum money.MicroUSD
	for _, c := range got {
		sum += c.AmountMicro
	}
	oct := perHours(usdMicro(7), 22*24, 744)
	if want := 3 * (oct + usdMicro(7) + usdMicro(7)); sum != want || w.project().SpentMicro != want {
		t.Fatalf("charged %d, spent %d, want %d", sum, w.project().SpentMicro, want)
	}
	if n := w.verified(); n["meter_charge"] != 9 || n["meter_started"] != 3 {
		t.Fatalf("ledger actions %v", n)
	}
	_ = ids
}

// With pause_services, an exhausted budget pauses the project's running
// services and their meters stop costing; a raise lets them run again at
// their price.
func TestExhaustedBudgetPausesServicesWhenThePolicySays(t *testing.T) {
	ctx := context.Background()
	w := newMeterWorld(t, "", day(2026, 11, 1, 0), usdMicro(7), BudgetLifetime)
	pol := DefaultPolicy()
	pol.BudgetPeriod, pol.OnExhausted = BudgetLifetime, PauseServices
	pj, _ := json.Marshal(pol)
	if _, err := w.st.DB().ExecContext(ctx, `UPDATE projects SET policy = ? WHERE id = ?`, string(pj), w.proj); err != nil {
		t.Fatal(err)
	}
	svc := w.launched("app", day(2026, 11, 1, 0), usdMicro(7))
	w.pass(day(2026, 11, 1, 1))
	sv, _ := w.st.Services().Get(ctx, w.org, svc)
	if sv.State != "paused" {
		t.Fatalf("service %s at 100 %% with pause_services", sv.State)
	}
	w.pass(day(2026, 11, 10, 0))
	if err := w.st.InTx(ctx, func(tx *store.Tx) error { return tx.Projects().SetBudgetLimit(ctx, w.proj, usdMicro(50)) }); err != nil {
		t.Fatal(err)
	}
	w.pass(day(2026, 11, 16, 0))
	if sv, _ = w.st.Services().Get(ctx, w.org, svc); sv.State != "live" {
		t.Fatalf("service %s after a raise", sv.State)
	}
	w.pass(day(2026, 12, 1, 0))
	// Running 1 h, paused until the 16th, running 15 days: the prepaid 7
	// USD covers 16 days of the 30 and 1 h, the rest is nothing.
	nov := w.charges()[svc+"@2026-11"]
	if want := perHours(usdMicro(7), 1, 720) + perHours(usdMicro(7), 360, 720); nov.UsageMicro != want || nov.AmountMicro != 0 {
		t.Fatalf("November: %+v, want %d used, all prepaid", nov, want)
	}
	if n := w.verified(); n["service_paused"] != 1 || n["service_resumed"] != 1 {
		t.Fatalf("ledger actions %v", n)
	}
}

// On an exhausted budget a new version that costs more by the month, or
// one that would bring a paused service back, is refused; one that costs
// the same is not.
func TestExhaustedBudgetRefusesCostlierVersions(t *testing.T) {
	ctx := context.Background()
	w := newMeterWorld(t, "", day(2026, 11, 1, 0), usdMicro(7), BudgetLifetime)
	svc := w.launched("app", day(2026, 11, 1, 0), usdMicro(7))
	sv, _ := w.st.Services().Get(ctx, w.org, svc)
	same, more := versionSpec{Run: "app"}, versionSpec{Run: "app", Addons: []string{"managed_postgres"}}
	if err := w.svc.Metering().refuseGrowthWhenExhausted(ctx, sv, same, same); err != nil {
		t.Fatalf("same price: %v", err)
	}
	var e *apierr.Error
	if err := w.svc.Metering().refuseGrowthWhenExhausted(ctx, sv, same, more); !errors.As(err, &e) || e.Code != "budget:exhausted" {
		t.Fatalf("an add-on more: %v", err)
	}
	sv.State = "paused"
	if err := w.svc.Metering().refuseGrowthWhenExhausted(ctx, sv, same, same); !errors.As(err, &e) || e.Code != "budget:exhausted" {
		t.Fatalf("a paused service back: %v", err)
	}
}

// The domains page and the leave package say when each registration runs
// out, so a human moving a domain elsewhere knows how long it has.
func TestDomainExpiryShownForTransferAndLeaving(t *testing.T) {
	ctx := context.Background()
	w := newMeterWorld(t, "", day(2026, 11, 1, 0), usdMicro(100), BudgetMonthly)
	if _, err := w.st.Domains().RecordPurchase(ctx, store.Purchase{Ref: "ref_1", Domain: "acme.dev", OrgID: w.org, Years: 2, AmountMicro: 1, AuthCode: "x", CreatedAt: day(2026, 11, 5, 0)}); err != nil {
		t.Fatal(err)
	}
	views, err := w.svc.Domains.DomainsFor(ctx, Human{OrgID: w.org, UserID: "hum_meter"})
	if err != nil || len(views) != 1 || views[0].Expires != "2028-11-05" {
		t.Fatalf("domains %+v, %v", views, err)
	}
	pkg, err := w.svc.Projects.Export(ctx, &auth.Principal{Kind: "agent", OrgID: w.org, KeyID: "key_x"}, w.proj)
	if err != nil {
		t.Fatal(err)
	}
	var man leaveManifest
	for _, f := range pkg.Files {
		if f.Path == LeaveManifestPath {
			if err := json.Unmarshal(f.Content, &man); err != nil {
				t.Fatal(err)
			}
		}
	}
	if man.DomainExpiry["acme.dev"] != "2028-11-05T00:00:00Z" {
		t.Fatalf("manifest %+v", man)
	}
}

// bought records a domain a launch of the project bought at at, with or
// without the human gate (the key's buy_domain scope).
func (w *meterWorld) bought(domain string, at time.Time, gated bool) {
	w.t.Helper()
	ctx := context.Background()
	task := "tsk_buy_" + strings.ReplaceAll(domain, ".", "_")
	pl, _ := json.Marshal(launchPayload{ProjectID: w.proj, placement: placement{Domain: domain}, Gated: gated, PurchaseRef: task})
	if err := w.st.Tasks().Insert(ctx, store.Task{ID: task, OrgID: w.org, ProjectID: w.proj, Kind: "launch", State: "succeeded", Steps: "[]", Payload: string(pl), CreatedAt: at, UpdatedAt: at}); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.st.Domains().RecordPurchase(ctx, store.Purchase{Ref: task, Domain: domain, OrgID: w.org, Years: 1, AmountMicro: 1, AuthCode: "x", CreatedAt: at}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *meterWorld) renewals(domain string) []store.DomainRenewal {
	w.t.Helper()
	rs, err := w.st.DomainRenewals().Renewals(context.Background(), domain)
	if err != nil {
		w.t.Fatal(err)
	}
	return rs
}

// A domain bought by a key holding buy_domain renews by itself in its
// last 30 days when the renewal fits the budget, once; one bought through
// the human gate does not: the human hears 30, 7 and 1 days ahead, once
// each, and without a renewal it lapses at expiry. A human's renewal on
// the domains page is charged like the automatic one.
func TestDomainRenewals(t *testing.T) {
	ctx := context.Background()
	w := newMeterWorld(t, "", day(2026, 1, 10, 0), usdMicro(500), BudgetLifetime)
	w.bought("auto.dev", day(2026, 1, 10, 0), false)
	w.bought("gated.dev", day(2026, 1, 10, 0), true)
	w.bought("human.dev", day(2026, 1, 10, 0), true)
	price := *w.svc.DomainRenewals().renewalPrice("auto.dev")

	w.pass(day(2026, 12, 1, 0)) // 40 days ahead: nothing yet
	if len(w.renewals("auto.dev")) != 0 || len(w.renewals("gated.dev")) != 0 {
		t.Fatal("renewed 40 days ahead")
	}
	for range 2 {
		w.pass(day(2026, 12, 12, 0)) // 29 days ahead
	}
	if rs := w.renewals("auto.dev"); len(rs) != 1 || rs[0].State != "renewed" || rs[0].AmountMicro != price {
		t.Fatalf("auto.dev renewals %+v", rs)
	}
	if got := w.project().SpentMicro; got != price {
		t.Fatalf("spent %d, want one renewal of %d", got, price)
	}
	if len(w.renewals("gated.dev")) != 0 {
		t.Fatal("a gated domain renewed without a human")
	}
	if err := w.svc.DomainRenewals().RenewDomain(ctx, Human{OrgID: w.org, UserID: "hum_meter"}, "human.dev"); err != nil {
		t.Fatal(err)
	}
	if err := w.svc.DomainRenewals().RenewDomain(ctx, Human{OrgID: w.org, UserID: "hum_meter"}, "human.dev"); err == nil {
		t.Fatal("renewed twice in one window")
	}
	w.pass(day(2027, 1, 4, 0)) // 6 days ahead
	w.pass(day(2027, 1, 9, 12))
	w.pass(day(2027, 1, 10, 1)) // expired
	notices, _ := w.st.DomainRenewals().DomainNotices(ctx, "gated.dev")
	if len(notices) != 3 {
		t.Fatalf("gated.dev notices %+v, want 30, 7 and 1 days ahead", notices)
	}
	if rs := w.renewals("gated.dev"); len(rs) != 1 || rs[0].State != "lapsed" {
		t.Fatalf("gated.dev renewals %+v", rs)
	}
	if rs := w.renewals("human.dev"); len(rs) != 1 || rs[0].State != "renewed" || rs[0].DecidedBy != "human:hum_meter" {
		t.Fatalf("human.dev renewals %+v", rs)
	}
	if got := w.project().SpentMicro; got != 2*price {
		t.Fatalf("spent %d, want two renewals", got)
	}
	views, _ := w.svc.Domains.DomainsFor(ctx, Human{OrgID: w.org, UserID: "hum_meter"})
	for _, v := range views {
		if v.Domain == "auto.dev" && v.Expires != "2028-01-10" {
			t.Fatalf("auto.dev expires %s after a renewal", v.Expires)
		}
	}
	// gated.dev's three, and human.dev's 30-day one before its human renewed.
	if n := w.verified(); n["domain_renewed"] != 2 || n["domain_lapsed"] != 1 || n["domain_expiry_notice"] != 4 {
		t.Fatalf("ledger actions %v", n)
	}
	if w.mail.count() < 3 {
		t.Fatalf("%d mails", w.mail.count())
	}
}

// A renewal that does not fit the budget is not made, even for a key with
// buy_domain: the human hears, and the domain lapses without one.
func TestDomainRenewalMustFitTheBudget(t *testing.T) {
	w := newMeterWorld(t, "", day(2026, 1, 10, 0), 1, BudgetLifetime)
	w.bought("tight.dev", day(2026, 1, 10, 0), false)
	w.pass(day(2026, 12, 20, 0))
	w.pass(day(2027, 1, 11, 0))
	if rs := w.renewals("tight.dev"); len(rs) != 1 || rs[0].State != "lapsed" {
		t.Fatalf("renewals %+v", rs)
	}
	if w.project().SpentMicro != 0 {
		t.Fatal("charged a renewal that did not fit")
	}
}
