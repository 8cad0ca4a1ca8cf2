package server

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/mcp"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/runner"
	"github.com/pierhq/pier/server/internal/service"
)

// Config is the server's settings. Each has a flag and an environment
// variable (see the README).
type Config struct {
	DataDir   string
	HTTPAddr  string
	HTTPSAddr string
	// HTTP3Addr is the UDP address of the HTTP/3 listener: empty takes the
	// HTTPS listener's host and bound port, "off" serves no HTTP/3.
	HTTP3Addr     string
	DNSAddr       string
	SMTPAddr      string
	BaseURL       string
	APIURL        string
	DatabaseURL   string
	PreviewDomain string
	// EdgeIPv4 and EdgeIPv6 are the addresses zones point launched domains at.
	EdgeIPv4, EdgeIPv6 string
	// ACMEDirectory, when set, is the ACME directory URL that certificates
	// come from instead of the local CA; ACMEEmail is the account contact
	// and ACMECAFile a PEM bundle trusted for the ACME server's own TLS.
	ACMEDirectory, ACMEEmail, ACMECAFile string
	// TrustedProxies are the CIDR prefixes (or addresses) of the proxies in
	// front of the replica, such as a load balancer: only from those peers
	// does the client address come from X-Forwarded-For (its rightmost hop
	// that is not a trusted proxy) or a PROXY protocol header. Rate limits,
	// signup limits, anonymous idempotency keys and logs use that address. None: every
	// caller is its TCP peer, whatever it sends.
	TrustedProxies []string
	// TaskJobTimeout bounds one run of a durable task.
	TaskJobTimeout time.Duration
	// TaskLease is how long a running task's lease outlives its last
	// renewal (renewed every third of it): a replica that dies mid-run
	// leaves its task to another after this and one sweep (5 s) at most.
	// Zero is tasks.DefaultLeaseTTL.
	TaskLease time.Duration
	// TaskRetries bound the retries of a durable task's transient errors;
	// zero fields take the defaults docs/architecture.md describes.
	TaskRetries TaskRetries
	// MCPAllowedOrigins are browser origins allowed to call /mcp besides the
	// base and API URLs and loopback pages of this server.
	MCPAllowedOrigins []string
	// RateLimits overrides the default buckets per class.
	RateLimits map[string]ratelimit.Policy
	// RateLimitRowPerRequest makes replicas on PostgreSQL write the shared
	// bucket once a request instead of leasing tokens in batches: the
	// design before leases, for benchmarks that measure leases against
	// it (bench/limits_bench_test.go). It has no flag; leave it off.
	RateLimitRowPerRequest bool
	// DisableEdgeFastPath serves the edge through net/http only, without
	// the fast path for its plain GET and HEAD requests (internal/edge/fastpath).
	DisableEdgeFastPath bool
	// ShutdownTimeout bounds graceful shutdown.
	ShutdownTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Listen bounds every HTTP connection, on both listeners and the
	// edge's fast path alike.
	Listen ListenLimits
	// Edge bounds the edge's memory: its hot cache of file bodies and the
	// sites and unknown hosts it remembers.
	Edge edge.Limits
	// DNS bounds the DNS server: zones in memory and response rate
	// limiting; DNSSecondaries may transfer zones with TSIG.
	DNS            dnsserver.Limits
	DNSSecondaries []dnsserver.Secondary
	// Quotas bound each organisation's live services, bundles and stored
	// bytes; zero fields take service.DefaultQuotas.
	Quotas service.Quotas
	// BlobStore keeps blob bodies in an S3-compatible bucket,
	// s3://BUCKET?endpoint=HOST:PORT; empty keeps them in the database.
	BlobStore string
	// BlobStoreKey and BlobStoreSecret sign the bucket's requests
	// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
	BlobStoreKey, BlobStoreSecret string
	// SMTPRelay is the smarthost outbound mail goes through,
	// smtp://HOST:PORT; empty refuses send_message.
	SMTPRelay string
	// SMTPMaxMessageBytes bounds an inbound message; SMTPPeerRate the
	// messages (and refused commands) per second one source network, a
	// /24 or a /64, may send (0: 10 a second).
	SMTPMaxMessageBytes int64
	SMTPPeerRate        float64
	// SMTPSessions bounds the SMTP sessions open at once, in total and
	// per source network; zero fields take smtpd's defaults (100 and 10).
	SMTPSessions SMTPSessions
	// MailRelays name the relays that send the hosted domains' outbound
	// mail, for their SPF records: addresses, prefixes, host names or SPF
	// mechanisms (ip4:, ip6:, a:, include:). None publishes "v=spf1 -all":
	// the MX, where tenants' code runs, is never named.
	MailRelays []string
	// SandboxNetwork is the prefix tenant services' sandboxes take their
	// addresses from (default 10.209.0.0/16). Mail from it never passes
	// SPF.
	SandboxNetwork netip.Prefix
	// SandboxPeers are the prefixes of the other replicas' hosts, allowed
	// through this host's firewall to its sandboxes' app port: their edges
	// reach the versions this host runs at their sandbox addresses, which
	// they must route to this host (docs/scale.md). Nothing else reaches
	// into a sandbox.
	SandboxPeers []netip.Prefix
	// InboxBytes bounds each inbox; zero takes the domain's default.
	InboxBytes int64
	// AppsDir holds running services' working directories (written again
	// from the store at each start); empty takes a directory in the
	// temporary directory named for DataDir. It must not be inside DataDir.
	AppsDir string
	// UnsandboxedServices lets process and worker services run as bare
	// processes where no sandbox can be set up: local development only.
	// Without it such a server refuses their launches.
	UnsandboxedServices bool
	// ServiceLimits bound each running version; zero fields take
	// runner.DefaultLimits.
	ServiceLimits runner.Limits
	// PostgresAdminURL is a PostgreSQL URL with the right to create roles
	// and databases; it enables the managed_postgres add-on.
	PostgresAdminURL string
	// Supervision tunes how running services restart and stop; zero fields
	// take the supervisor's defaults (1 s backoff doubling to 30 s, a crash
	// loop at 5 restarts in 2 minutes, 10 s between SIGTERM and SIGKILL).
	Supervision Supervision
	// ServiceLogLines bounds each service's kept log; zero keeps 5,000.
	ServiceLogLines int64
	// RegistrarPrices set the sandbox registrar's first-year price for some
	// TLDs; the rest keep the catalog's.
	RegistrarPrices registrar.PriceList
	// StepPause holds launches at a step, for the crash tests (the hidden
	// flags --test-pause-after-step and --test-pause-inside-step, or
	// PIER_TEST_PAUSE_AFTER_STEP and PIER_TEST_PAUSE_INSIDE_STEP).
	StepPause service.StepPause
	// MeterInterval is how often the meter's pass runs: services charged
	// for ended periods, monthly budgets rolled over, notices recorded and
	// mailed. Zero takes a minute; negative turns the pass off.
	MeterInterval time.Duration
}

// DefaultSandboxNetwork is where tenant sandboxes' addresses come from.
var DefaultSandboxNetwork = netip.MustParsePrefix("10.209.0.0/16")

// SMTPSessions bound concurrent SMTP sessions, as Postfix's
// smtpd_client_connection_count_limit does per client.
type SMTPSessions struct {
	Total, PerNetwork int
}

// TaskRetries bound how a durable task's transient errors are retried
// before the task fails with provider:failed.
type TaskRetries struct {
	// MaxAttempts is the runs a task gets (default 10).
	MaxAttempts int
	// Backoff is the wait before the first retry, doubling at each further
	// one up to MaxBackoff (defaults 1 s and one minute).
	Backoff, MaxBackoff time.Duration
	// Poll is how often the runner looks for retries coming due
	// (default 5 s).
	Poll time.Duration
}

// ListenLimits bound HTTP connections, like nginx's client_header_timeout,
// client_body_timeout, send_timeout, keepalive_timeout and
// large_client_header_buffers.
type ListenLimits struct {
	// HeaderTimeout bounds a TLS handshake and reading a request's head,
	// and how long a new connection may stay silent.
	HeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included;
	// WriteTimeout writing its answer; IdleTimeout the wait for the next
	// request on a kept-alive connection.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's head.
	MaxHeaderBytes int
}

// DefaultListenLimits are the listeners' defaults.
var DefaultListenLimits = ListenLimits{HeaderTimeout: 10 * time.Second, ReadTimeout: 2 * time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 75 * time.Second, MaxHeaderBytes: 32 << 10}

func (l ListenLimits) withDefaults() ListenLimits {
	d := DefaultListenLimits
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = d.HeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = d.ReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	return l
}

// DefaultRateLimits are the buckets per caller: search and estimate are
// cheap reads; quotes hold money; signups create accounts.
var DefaultRateLimits = map[string]ratelimit.Policy{
	"search": {PerSecond: 20, Burst: 60},
	"quotes": {PerSecond: 2, Burst: 10},
	"signup": {PerSecond: 0.2, Burst: 5},
	// Every MCP message, each entry of a batch included.
	mcp.RateClass: {PerSecond: 50, Burst: 100},
}

// env is the environment variable name, else def when it is unset or
// empty. This file is the only one that reads the environment: the
// commands' flags take their defaults from it, and everything below the
// commands is handed a Config (internal/tools/importrules checks it).
// envList reads a comma-separated environment variable.
func envList(name string) []string {
	if v := os.Getenv(name); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// DefaultDataDir is $PIER_DATA_DIR, else ~/.local/share/pier.
func DefaultDataDir() string {
	if d := env("PIER_DATA_DIR", ""); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".pier"
	}
	return filepath.Join(home, ".local", "share", "pier")
}

func (c *Config) setDefaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir()
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:8080"
	}
	if c.RateLimits == nil {
		c.RateLimits = DefaultRateLimits
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	c.Listen = c.Listen.withDefaults()
	if c.DNS == (dnsserver.Limits{}) {
		c.DNS = dnsserver.DefaultLimits
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PreviewDomain == "" {
		c.PreviewDomain = "localhost"
	}
	if !c.SandboxNetwork.IsValid() {
		c.SandboxNetwork = DefaultSandboxNetwork
	}
	// A server on an ephemeral HTTP port (tests, benchmarks) takes
	// ephemeral ports for its other listeners too, so instances never
	// collide.
	ephemeral := strings.HasSuffix(c.HTTPAddr, ":0")
	if c.HTTPSAddr == "" {
		c.HTTPSAddr = "127.0.0.1:8443"
		if ephemeral {
			c.HTTPSAddr = "127.0.0.1:0"
		}
	}
	if c.DNSAddr == "" {
		c.DNSAddr = "127.0.0.1:5353"
		if ephemeral {
			c.DNSAddr = "127.0.0.1:0"
		}
	}
	if c.SMTPAddr == "" {
		c.SMTPAddr = "127.0.0.1:2525"
		if ephemeral {
			c.SMTPAddr = "127.0.0.1:0"
		}
	}
	if c.EdgeIPv4 == "" {
		c.EdgeIPv4 = "127.0.0.1"
	}
	if c.EdgeIPv6 == "" {
		c.EdgeIPv6 = "::1"
	}
}

// RateLimit is one token bucket policy: a refill rate and a size.
type RateLimit = ratelimit.Policy

// Supervision tunes the local supervisor of running services.
type Supervision struct {
	RestartBase, RestartMax time.Duration
	CrashRestarts           int
	CrashWindow             time.Duration
	StopGrace               time.Duration
	// Drain is how long a replaced version keeps running after the switch.
	Drain time.Duration
}

// durationEnv reads a duration from the environment, def when unset or
// unreadable.
func durationEnv(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
