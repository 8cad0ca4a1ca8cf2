package service

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// Service is the domain layer, one type per noun. Each noun shares core:
// the store, the clock, the providers launches drive, and the other nouns.
type Service struct {
	*core

	Accounts   *Accounts
	Approvals  *Approvals
	Bundles    *Bundles
	Domains    *Domains
	Launches   *Launches
	Mail       *Mail
	Onboarding *Onboarding
	Projects   *Projects
	Quotes     *Quotes
	Runs       *Runs
	Tasks      *Tasks
}

// core is what every noun needs.
type core struct {
	store *store.Store
	clock func() time.Time
	log   *slog.Logger

	baseURLFunc   func() string
	platform      Platform
	zone          zone.ZoneConfig
	previewDomain string
	pause         StepPause
	quotaLimits   Quotas
	prices        registrar.PriceList

	accounts   *Accounts
	approvals  *Approvals
	bundles    *Bundles
	domains    *Domains
	launches   *Launches
	mail       *Mail
	onboarding *Onboarding

	relay       MailRelay
	inboxBytes  int64
	mailWaiters waiters
	projects    *Projects
	quotes      *Quotes
	tasks       *Tasks

	runs      *Runs
	runtime   Runtime
	databases Databases
	logs      *logWriter
	drain     time.Duration
}

// Accounts signs humans in and manages agent keys.
type Accounts struct{ *core }

// Approvals opens human gates, decides them and carries out the decision.
type Approvals struct{ *core }

// Bundles takes uploads.
type Bundles struct{ *core }

// Domains searches, lists and transfers out domains.
type Domains struct{ *core }

// Launches launches and tears down services and runs their tasks.
type Launches struct{ *core }

// Onboarding runs signup and billing setup.
type Onboarding struct {
	*core
	recent recentSignups
}

// Projects manages projects, their budgets, quotas and exports.
type Projects struct{ *core }

// Quotes prices, holds, releases and consumes quotes.
type Quotes struct{ *core }

// Tasks reads tasks.
type Tasks struct{ *core }

// StepPause names launch steps at which the task runner stops and waits to
// be killed: After a step is saved, or Inside it, after its provider acted
// and before it is saved, the worst moment to die. Empty names never match.
type StepPause struct{ After, Inside string }

// Now is the service's clock.
func (c *core) Now() time.Time { return c.clock() }

// Config is what the domain layer is given at construction.
type Config struct {
	Store *store.Store
	Now   func() time.Time // default time.Now
	Log   *slog.Logger     // default slog.Default()
	// BaseURL gives the public base URL for links in actions.
	BaseURL func() string
	// Platform is what launches drive; without one, tasks are recorded
	// and nothing is served.
	Platform Platform
	// Zone is what every launched domain's zone carries; PreviewDomain is
	// the zone preview hosts live under.
	Zone          zone.ZoneConfig
	PreviewDomain string
	// Pause holds the launch runner at a step, for crash tests.
	Pause StepPause
	// Quotas bound each organisation; zero fields take DefaultQuotas.
	Quotas Quotas
	// Prices are the sandbox registrar's prices set by the operator, by
	// TLD; the rest are the catalog's.
	Prices registrar.PriceList
	// Relay sends outbound mail; nil refuses send_message with
	// mail:relay_unconfigured.
	Relay MailRelay
	// InboxBytes bounds each inbox; zero takes DefaultInboxBytes.
	InboxBytes int64
	// Runtime runs process and worker services; nil answers their
	// launches with plan:not_implemented.
	Runtime Runtime
	// Databases is the managed PostgreSQL add-on; nil refuses it with
	// plan:addon_unavailable.
	Databases Databases
	// LogLines bounds each service's kept log; zero keeps 5,000 lines.
	LogLines int64
	// Drain is how long a replaced version keeps running after traffic
	// switched away from it, for its requests in flight and for other
	// replicas to see the switch; zero takes 3 s.
	Drain time.Duration
}

// Platform is what launches drive outside the database. Each call is
// idempotent: a task step that is retried calls it again. The server
// implements it over the task runner, the edge, DNS and the CA.
type Platform interface {
	// Enqueue hands a committed task to the durable runner.
	Enqueue(ctx context.Context, taskID string) error
	// InvalidateHosts and InvalidateZone tell the edge's and DNS's caches
	// that what they hold for these names changed.
	InvalidateHosts(hosts ...string)
	InvalidateZone(domain string)
	// Certificate issues, or finds, the certificate for a host.
	Certificate(host string) error
	// VerifyHTTPS fetches https://host/ from the server's own TLS
	// listener, verifying the chain: a launch is HTTPS-ready only once it
	// is served.
	VerifyHTTPS(ctx context.Context, host string) error
	// Ports are the edge's public HTTP and HTTPS ports, for URLs; empty
	// means the scheme's default.
	Ports() (http, https string)
	// VerifyDNS asks the server's own DNS listener for name's records of
	// type and succeeds once one contains want.
	VerifyDNS(ctx context.Context, name, rrtype, want string) error
}

// noPlatform records and serves nothing: for tools that only write
// the database, such as creating a project from the command line.
type noPlatform struct{}

func (noPlatform) Enqueue(context.Context, string) error                   { return nil }
func (noPlatform) InvalidateHosts(...string)                               {}
func (noPlatform) InvalidateZone(string)                                   {}
func (noPlatform) Certificate(string) error                                { return nil }
func (noPlatform) VerifyHTTPS(context.Context, string) error               { return nil }
func (noPlatform) Ports() (string, string)                                 { return "", "" }
func (noPlatform) VerifyDNS(context.Context, string, string, string) error { return nil }

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Platform == nil {
		cfg.Platform = noPlatform{}
	}
	c := &core{store: cfg.Store, clock: cfg.Now, log: cfg.Log, baseURLFunc: cfg.BaseURL, platform: cfg.Platform,
		zone: cfg.Zone, previewDomain: cfg.PreviewDomain, pause: cfg.Pause, quotaLimits: cfg.Quotas, prices: cfg.Prices,
		relay: cfg.Relay, inboxBytes: cfg.InboxBytes, runtime: cfg.Runtime, databases: cfg.Databases,
		logs: newLogWriter(cfg.Store, cfg.LogLines), drain: cfg.Drain}
	if c.drain <= 0 {
		c.drain = 3 * time.Second
	}
	c.runs = &Runs{c}
	c.accounts, c.approvals, c.bundles = &Accounts{c}, &Approvals{c}, &Bundles{c}
	c.domains, c.launches, c.onboarding = &Domains{c}, &Launches{c}, &Onboarding{core: c}
	c.projects, c.quotes, c.tasks = &Projects{c}, &Quotes{c}, &Tasks{c}
	c.mail = &Mail{c}
	return &Service{core: c,
		Accounts: c.accounts, Approvals: c.approvals, Bundles: c.bundles,
		Domains: c.domains, Launches: c.launches, Mail: c.mail, Onboarding: c.onboarding,
		Projects: c.projects, Quotes: c.quotes, Runs: c.runs, Tasks: c.tasks,
	}
}

// usd renders an amount as the contract's USD number. Rendering is the
// only place money meets a float.
func usd(m money.MicroUSD) float64 { return m.USD() }

func bytesReader(s string) *strings.Reader { return strings.NewReader(s) }
