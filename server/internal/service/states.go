package service

// The states the domain's objects pass through. The store keeps them as
// plain strings; the service compares them only through these constants,
// converting a row's state where it reads it (TaskState(t.State)), so a
// misspelt state fails to compile instead of never matching.

// TaskKind is what a task carries out.
type TaskKind string

const (
	TaskKindLaunch            TaskKind = "launch"
	TaskKindDeploy            TaskKind = "deploy"
	TaskKindRollback          TaskKind = "rollback"
	TaskKindTeardown          TaskKind = "teardown"
	TaskKindEmailSetup        TaskKind = "email_setup"
	TaskKindBudgetRaise       TaskKind = "budget_raise"
	TaskKindQuoteApproval     TaskKind = "quote_approval"
	TaskKindWorkflow          TaskKind = "workflow"
	TaskKindRegistrantContact TaskKind = "registrant_contact"
)

// TaskState is where a task is in its life.
type TaskState string

const (
	TaskQueued        TaskState = "queued"
	TaskRunning       TaskState = "running"
	TaskInputRequired TaskState = "input_required"
	TaskSucceeded     TaskState = "succeeded"
	TaskFailed        TaskState = "failed"
	TaskCanceled      TaskState = "canceled"
)

// Active says the task is still to run or running.
func (s TaskState) Active() bool { return s == TaskQueued || s == TaskRunning }

// Ended says the task will not change again.
func (s TaskState) Ended() bool { return s == TaskSucceeded || s == TaskFailed || s == TaskCanceled }

// StepState is where one step of a task is.
type StepState string

const (
	StepStatePending       StepState = "pending"
	StepStateRunning       StepState = "running"
	StepStateInputRequired StepState = "input_required"
	StepStateSucceeded     StepState = "succeeded"
	StepStateFailed        StepState = "failed"
	StepStateSkipped       StepState = "skipped"
	StepStateDenied        StepState = "denied"
)

// QuoteState is what became of a quote's hold on the budget.
type QuoteState string

const (
	QuoteHeld     QuoteState = "held"
	QuoteConsumed QuoteState = "consumed"
	QuoteReleased QuoteState = "released"
	QuoteExpired  QuoteState = "expired"
	QuoteNotHeld  QuoteState = "not_held"
)

// ServiceState is where a service is in its life.
type ServiceState string

const (
	ServiceLaunching   ServiceState = "launching"
	ServiceLive        ServiceState = "live"
	ServiceCrashed     ServiceState = "crashed"
	ServicePaused      ServiceState = "paused"
	ServiceFailed      ServiceState = "failed"
	ServiceTearingDown ServiceState = "tearing_down"
	ServiceTornDown    ServiceState = "torn_down"
)

// Gone says the service is torn down, being torn down or failed: it
// serves nothing and holds no name.
func (s ServiceState) Gone() bool {
	return s == ServiceTornDown || s == ServiceTearingDown || s == ServiceFailed
}

// VersionState is where one version of a service is.
type VersionState string

const (
	VersionStarting   VersionState = "starting"
	VersionLive       VersionState = "live"
	VersionCrashed    VersionState = "crashed"
	VersionSuperseded VersionState = "superseded"
	VersionFailed     VersionState = "failed"
)

// DomainState says who holds a domain name, from the caller's side.
type DomainState string

const (
	DomainOwned DomainState = "owned"
	DomainFree  DomainState = "free"
	DomainTaken DomainState = "taken"
)

// MailState is where a domain's mail set-up is.
type MailState string

const (
	MailSettingUp MailState = "setting_up"
	MailReady     MailState = "ready"
	MailRemoved   MailState = "removed"
)

// GateState is a human gate's decision.
type GateState string

const (
	GatePending  GateState = "pending"
	GateApproved GateState = "approved"
	GateDenied   GateState = "denied"
)

// GateKind is what a human gate decides.
type GateKind string

const (
	GateDomainRegistration GateKind = "domain_registration"
	GateBudgetRaise        GateKind = "budget_raise"
	GateQuoteApproval      GateKind = "quote_approval"
	GateRegistrantContact  GateKind = "registrant_contact"
)

// RenewalState is what a domain's renewal came to.
type RenewalState string

const (
	RenewalRenewed RenewalState = "renewed"
	RenewalLapsed  RenewalState = "lapsed"
)

// SignupState is where an agent's signup is.
type SignupState string

const (
	SignupPendingReview SignupState = "pending_review"
	SignupPendingCard   SignupState = "pending_card"
	SignupComplete      SignupState = "complete"
	SignupClaimed       SignupState = "claimed"
	SignupExpired       SignupState = "expired"
)

// BillingState is where a card setup is.
type BillingState string

const (
	BillingPending  BillingState = "pending"
	BillingDeclined BillingState = "declined"
	BillingComplete BillingState = "complete"
	BillingExpired  BillingState = "expired"
)

// RegistrantState is where a proposed registrant contact is.
type RegistrantState string

const (
	RegistrantPending    RegistrantState = "pending"
	RegistrantConfirmed  RegistrantState = "confirmed"
	RegistrantDeclined   RegistrantState = "declined"
	RegistrantSuperseded RegistrantState = "superseded"
)

// DatabaseState is where a service's managed database is.
type DatabaseState string

const (
	DatabaseReady   DatabaseState = "ready"
	DatabaseDropped DatabaseState = "dropped"
)

// HealthState is what a running version's health check last said.
type HealthState string

const (
	HealthHealthy   HealthState = "healthy"
	HealthStarting  HealthState = "starting"
	HealthUnhealthy HealthState = "unhealthy"
	HealthCrashed   HealthState = "crashed"
	HealthStopped   HealthState = "stopped"
)
