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

// Service is the domain layer, one type per noun. Each noun holds only
// what it calls (nouns.go); New wires them.
type Service struct {
	timing
	links
	previews

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

	meter    *Meter
	renewals *Renewals
}

// StepPause names launch steps at which the task runner stops and waits to
// be killed: After a step is saved, or Inside it, after its provider acted
// and before it is saved, the worst moment to die. Empty names never match.
type StepPause struct{ After, Inside string }

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

// New returns a Service: each noun given what it calls.
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
	if cfg.Drain <= 0 {
		cfg.Drain = 3 * time.Second
	}
	st, clock, url := cfg.Store, timing{cfg.Now}, links{cfg.BaseURL}
	ed, pv := edge{platform: cfg.Platform, log: cfg.Log}, previews{cfg.PreviewDomain}

	tasks := &Tasks{store: st, links: url, edge: ed}
	accounts := &Accounts{store: st, timing: clock, links: url}
	onboarding := &Onboarding{store: st, timing: clock, links: url, accounts: accounts}
	zones := &Zones{store: st, timing: clock, edge: ed, zone: cfg.Zone}
	out := &outbox{store: st, timing: clock, relay: cfg.Relay, inboxBytes: cfg.InboxBytes}
	steps := &stepRunner{store: st, timing: clock, edge: ed, pause: cfg.Pause}
	deploys := &deployer{store: st, timing: clock, edge: ed, tasks: tasks}
	renewals := &Renewals{store: st, timing: clock, links: url, edge: ed, outbox: out, prices: cfg.Prices}
	meter := &Meter{store: st, timing: clock, links: url, edge: ed, outbox: out, pause: cfg.Pause, renewals: renewals}
	books := &projectBooks{store: st, timing: clock, limits: limits{cfg.Quotas}, meter: meter}
	domains := &Domains{store: st, timing: clock, edge: ed, Zones: zones, prices: cfg.Prices, projects: books}
	approvals := &Approvals{store: st, timing: clock, links: url, edge: ed, prices: cfg.Prices,
		accounts: accounts, onboarding: onboarding, projects: books, tasks: tasks}
	quotes := &Quotes{store: st, timing: clock, links: url, log: cfg.Log, prices: cfg.Prices, databases: cfg.Databases,
		approvals: approvals, launches: domains, projects: books}
	runs := &Runs{store: st, timing: clock, edge: ed, deployer: deploys, runtime: cfg.Runtime, databases: cfg.Databases,
		logs: newLogWriter(st, cfg.LogLines)}
	mail := &Mail{store: st, timing: clock, links: url, edge: ed, previews: pv, outbox: out, Zones: zones, stepRunner: steps,
		domains: domains, projects: books, quotes: quotes, tasks: tasks}
	launches := &Launches{store: st, timing: clock, edge: ed, previews: pv, Zones: zones, stepRunner: steps, deployer: deploys,
		prices: cfg.Prices, runtime: cfg.Runtime, databases: cfg.Databases, drain: cfg.Drain,
		mail: mail, meter: meter, projects: books, quotes: quotes, runs: runs, tasks: tasks}
	projects := &Projects{store: st, timing: clock, links: url, projectBooks: books, Zones: zones, databases: cfg.Databases,
		launches: launches, meter: meter}
	bundles := &Bundles{store: st, timing: clock, projects: books, known: newKnownBlobs()}
	// A decided quote gate resumes the launches that wait on it.
	approvals.onDecision = append(approvals.onDecision, launches.resumeWaitingLaunches)
	return &Service{timing: clock, links: url, previews: pv,
		Accounts: accounts, Approvals: approvals, Bundles: bundles,
		Domains: domains, Launches: launches, Mail: mail, Onboarding: onboarding,
		Projects: projects, Quotes: quotes, Runs: runs, Tasks: tasks,
		meter: meter, renewals: renewals,
	}
}

// usd renders an amount as the contract's USD number. Rendering is the
// only place money meets a float.
func usd(m money.MicroUSD) float64 { return m.USD() }

func bytesReader(s string) *strings.Reader { return strings.NewReader(s) }
