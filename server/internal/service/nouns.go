package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// Each noun holds only what it calls: the store's nouns it reads and
// writes (through a view of the store that names them), the clock, the
// ports it drives, and the other nouns it calls, each behind an interface
// the caller declares with the methods it calls. New wires them. The
// graph of which noun holds which is drawn in docs/architecture.md and
// has no cycles (nouns_test.go holds the code to the drawing).
//
// A transaction is the store's: a noun that needs one asks its view for
// InTx, and the *store.Tx it gets reaches every store noun, as before, so
// that what commits together still does.

// The store's nouns, one view each.
type (
	txStore interface {
		InTx(ctx context.Context, fn func(tx *store.Tx) error) error
		// InGroupTx is InTx committed together with others on SQLite.
		InGroupTx(ctx context.Context, fn func(tx *store.Tx) error) error
	}
	accountsStore        interface{ Accounts() store.Accounts }
	bundlesStore         interface{ Bundles() store.Bundles }
	domainsStore         interface{ Domains() store.Domains }
	domainRenewalsStore  interface{ DomainRenewals() store.DomainRenewals }
	gatesStore           interface{ Gates() store.Gates }
	keysStore            interface{ Keys() store.Keys }
	ledgerStore          interface{ Ledger() store.Ledger }
	mailStore            interface{ Mail() store.Mail }
	metersStore          interface{ Meters() store.Meters }
	onboardingStore      interface{ Onboarding() store.Onboarding }
	projectsStore        interface{ Projects() store.Projects }
	quotesStore          interface{ Quotes() store.Quotes }
	serviceLogsStore     interface{ ServiceLogs() store.ServiceLogs }
	serviceRunsStore     interface{ ServiceRuns() store.ServiceRuns }
	serviceVersionsStore interface{ ServiceVersions() store.ServiceVersions }
	servicesStore        interface{ Services() store.Services }
	tasksStore           interface{ Tasks() store.Tasks }
)

// Accounts signs humans in and manages agent keys.
type Accounts struct {
	store interface {
		txStore
		accountsStore
		keysStore
	}
	timing
	links
}

// Approvals opens human gates, decides them and carries out the decision.
// What a decided gate means to the nouns waiting on it, Approvals does not
// know: they subscribe (onDecision).
type Approvals struct {
	store interface {
		txStore
		accountsStore
		domainRenewalsStore
		gatesStore
		keysStore
		ledgerStore
		metersStore
		projectsStore
		quotesStore
		servicesStore
		tasksStore
	}
	timing
	links
	edge
	prices registrar.PriceList

	accounts interface {
		ListKeys(ctx context.Context, orgID string) ([]store.APIKey, error)
	}
	onboarding interface {
		PaymentMethodFor(ctx context.Context, orgID string) (*store.PaymentMethod, error)
	}
	projects approvalProjects
	tasks    approvalTasks
	// onDecision are called, in the decision's transaction, once a human
	// decided a quote's gate; New subscribes Launches.
	onDecision []DecisionHandler
}

// DecisionHandler carries out what a human's decision on a quote's gate
// (held: approved and the quote held) means to a noun that waits on it,
// in the decision's transaction. It answers the tasks to queue once the
// transaction commits.
type DecisionHandler func(ctx context.Context, tx *store.Tx, h Human, g store.Gate, payload map[string]any, held bool, result map[string]any, now time.Time) ([]string, error)

// Bundles takes uploads.
type Bundles struct {
	store interface {
		txStore
		bundlesStore
		projectsStore
	}
	timing
	projects interface {
		checkBundleQuota(ctx context.Context, orgID string, addBytes int64) error
	}
	known *knownBlobs
}

// Domains searches, lists and transfers out domains.
type Domains struct {
	store interface {
		txStore
		domainRenewalsStore
		domainsStore
		servicesStore
	}
	timing
	edge
	*Zones
	prices   registrar.PriceList
	projects interface {
		State(ctx context.Context, p *auth.Principal, projectID string) (ProjectState, error)
	}
}

// Launches launches and tears down services and runs their tasks.
type Launches struct {
	store interface {
		txStore
		bundlesStore
		domainsStore
		ledgerStore
		serviceVersionsStore
		servicesStore
		tasksStore
	}
	timing
	edge
	previews
	*Zones
	*stepRunner
	*deployer
	prices    registrar.PriceList
	runtime   Runtime
	databases Databases
	drain     time.Duration

	mail interface {
		runSetup(ctx context.Context, t store.Task) error
	}
	meter interface {
		refuseGrowthWhenExhausted(ctx context.Context, svc store.Service, prev, next versionSpec) error
	}
	projects interface {
		checkServiceQuota(ctx context.Context, orgID string) error
	}
	quotes interface {
		Consume(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID, quoteID string) (Consumed, error)
		awaitedQuote(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID, quoteID string) (Consumed, error)
		releaseRefusedQuote(ctx context.Context, p *auth.Principal, quoteID string)
	}
	runs interface {
		createDatabase(ctx context.Context, orgID, serviceID string) (string, error)
		procfileCommand(ctx context.Context, b store.Bundle, target string) (string, error)
		releaseDatabase(ctx context.Context, serviceID string) (string, error)
		startStep(ctx context.Context, pl *launchPayload) (string, error)
		stopAll(ctx context.Context, serviceID string) error
		switchTo(ctx context.Context, pl *launchPayload) (string, error)
	}
	tasks launchTasks
}

// Mail sets up mail on owned domains, keeps addresses and inboxes, takes
// delivered messages and answers for them.
type Mail struct {
	store interface {
		txStore
		domainsStore
		ledgerStore
		mailStore
		projectsStore
		quotesStore
		tasksStore
	}
	timing
	links
	edge
	previews
	*outbox
	*Zones
	*stepRunner

	domains interface {
		State(ctx context.Context, p *auth.Principal, domain string) (DomainState, error)
	}
	projects interface {
		State(ctx context.Context, p *auth.Principal, projectID string) (ProjectState, error)
	}
	quotes interface {
		Consume(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID, quoteID string) (Consumed, error)
	}
	tasks interface {
		Get(ctx context.Context, orgID, id string) (*Task, error)
	}
}

// mailBudgetStore is what mailBudget reads.
type mailBudgetStore interface {
	mailStore
	projectsStore
	tasksStore
}

// Onboarding runs signup and billing setup.
type Onboarding struct {
	store interface {
		txStore
		onboardingStore
		projectsStore
		quotesStore
	}
	timing
	links
	recent   recentSignups
	accounts interface {
		createKey(ctx context.Context, tx *store.Tx, orgID, name string, scopes []string, actor string) (string, store.APIKey, error)
		startSession(ctx context.Context, tx *store.Tx, h store.Human, via string, now time.Time) (string, Session, error)
	}
}

// Projects manages projects, their budgets, quotas and exports. Deleting
// one tears its services down (launches); what the other nouns ask of a
// project is its books' (projectBooks), below them.
type Projects struct {
	store interface {
		txStore
		accountsStore
		bundlesStore
		domainRenewalsStore
		domainsStore
		keysStore
		ledgerStore
		mailStore
		projectsStore
		servicesStore
	}
	timing
	links
	*projectBooks
	*Zones
	databases Databases

	launches interface {
		Teardown(ctx context.Context, p *auth.Principal, serviceID string) (*Task, bool, error)
	}
	meter interface {
		SettleProject(ctx context.Context, orgID, projectID string) error
	}
}

// projectBooks reads projects and keeps their books: holds that ran out,
// the organisation's quotas. The nouns that charge or count read them here.
type projectBooks struct {
	store interface {
		accountsStore
		projectsStore
		quotesStore
	}
	timing
	limits
	meter bookMeter
}

// Quotes prices, holds, releases and consumes quotes.
type Quotes struct {
	store interface {
		txStore
		projectsStore
		quotesStore
	}
	timing
	links
	log       *slog.Logger
	prices    registrar.PriceList
	databases Databases

	approvals quoteGates
	// launches answers whether a launch could have a domain: Domains.
	launches interface {
		domainFree(ctx context.Context, p *auth.Principal, projectID, domain string) error
	}
	projects interface {
		expireHolds(ctx context.Context, tx *store.Tx, p *store.Project, now time.Time) error
	}
}

// Runs supervises running services: their versions, logs, variables,
// health and rollback. The processes themselves run on a Runtime.
type Runs struct {
	store interface {
		bundlesStore
		ledgerStore
		projectsStore
		serviceLogsStore
		serviceRunsStore
		serviceVersionsStore
		servicesStore
	}
	timing
	edge
	*deployer
	runtime   Runtime
	databases Databases
	logs      *logWriter
}

// Tasks reads tasks.
type Tasks struct {
	store interface {
		projectsStore
		servicesStore
		tasksStore
	}
	links
	edge
}

// Meter meters running services against their projects' budgets, rolls
// monthly budgets over, and sends the budget's notices.
type Meter struct {
	store interface {
		txStore
		metersStore
		projectsStore
	}
	timing
	links
	edge
	*outbox
	pause    StepPause
	renewals interface {
		renewDomains(ctx context.Context) error
	}
}

// Renewals renews domains before they expire, within budget and the
// purchase's approval rule.
type Renewals struct {
	store interface {
		txStore
		domainRenewalsStore
		domainsStore
		metersStore
		projectsStore
		tasksStore
	}
	timing
	links
	edge
	*outbox
	prices registrar.PriceList
}

// Zones writes domains' zones. A zone has two owners (zones.go): the
// service a domain serves, through Launches and Domains, and the domain's
// mail, through Mail; both write here.
type Zones struct {
	store interface {
		domainsStore
		mailStore
	}
	timing
	edge
	zone zone.ZoneConfig
}

// outbox writes, signs and delivers mail: to an inbox Pier hosts, and
// through the relay elsewhere. Mail sends with it, and so do the meter's
// and the renewals' notices.
type outbox struct {
	store interface {
		bundlesStore
		mailStore
	}
	timing
	relay       MailRelay
	inboxBytes  int64
	mailWaiters waiters
}

// stepRunner loads a task and carries its steps (runningTask), for the
// nouns whose tasks the runner works: Launches and Mail.
type stepRunner struct {
	store tasksStore
	timing
	edge
	pause StepPause
}

// deployer starts the task that puts a version live, for a relaunch
// (Launches) and a change of variables or a rollback (Runs).
type deployer struct {
	store txStore
	timing
	edge
	tasks deployTasks
}
