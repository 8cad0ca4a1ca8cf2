package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/runner"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/tasks"
	"github.com/pierhq/pier/server/internal/tlsca"
)

// NewCommands returns `pier server`, `pier admin` and `pier sandbox
// publish-reference`.
func NewCommands() []*cobra.Command {
	return []*cobra.Command{newServerCmd(), newAdminCmd(), newCACmd(), newSandboxCmd()}
}

// serverOptions are the server command's flags: the configuration, and the
// flags parsed into it when the command runs.
type serverOptions struct {
	cfg                         Config
	logLevel, logFormat         string
	limits, secondaries, prices []string
	mailRelays                  []string
	sandboxNetwork              string
	sandboxPeers                []string
	edgeFastPath                bool
}

func newServerCmd() *cobra.Command {
	o := &serverOptions{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the Pier server with embedded defaults",
		Long: `Run the Pier server: the REST API, published schemas and the human pages.

With no flags it keeps its state in SQLite under the data directory
($PIER_DATA_DIR, else ~/.local/share/pier) and listens on 127.0.0.1:8080.
Pass --database-url postgres://… to use PostgreSQL instead. SIGINT or
SIGTERM drains in-flight requests, then exits.`,
		Example: `  pier server
  PIER_DATA_DIR=/tmp/pier pier server --http-addr 127.0.0.1:9090
  pier server --database-url postgres://pier@localhost/pier`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runServer(cmd, o) },
	}
	f := cmd.Flags()
	bindListenFlags(f, o)
	bindServiceFlags(f, o)
	bindLimitFlags(f, o)
	return cmd
}

// runServer settles the configuration, serves until SIGINT or SIGTERM,
// and drains.
func runServer(cmd *cobra.Command, o *serverOptions) error {
	log := newLogger(cmd.ErrOrStderr(), o.logLevel, o.logFormat)
	if err := o.settle(log); err != nil {
		return err
	}
	cfg := o.cfg
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := s.Listen(); err != nil {
		s.store.Close()
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Pier is serving at %s (%s, data in %s)\n", s.BaseURL(), s.store.Engine(), s.cfg.DataDir)
	// pier admin and pier ca find the data directory from here.
	if remove, err := writeRunFile(s.cfg.DataDir, s.BaseURL(), cfg.DatabaseURL != ""); err != nil {
		log.Warn("could not write the run file; pier admin will not find this server's data directory without --data-dir", "path", RunFile(), "err", err)
	} else {
		defer remove()
	}
	if cfg.DatabaseURL == "" {
		// Embedded mode: this machine's operator is the one person
		// who can sign in before anyone else exists.
		announceOperator(ctx, cmd.ErrOrStderr(), s.svc.Accounts, s.BaseURL(), s.log)
	}
	return s.Serve(ctx)
}

// settle parses the flags given as text into the configuration.
func (o *serverOptions) settle(log *slog.Logger) error {
	cfg := &o.cfg
	if len(o.limits) > 0 {
		limits, err := parseRateLimits(o.limits)
		if err != nil {
			return err
		}
		cfg.RateLimits = limits
	}
	for _, sec := range o.secondaries {
		name, secret, ok := strings.Cut(sec, ":")
		if _, err := base64.StdEncoding.DecodeString(secret); !ok || name == "" || err != nil {
			return fmt.Errorf("--dns-secondary %q: want TSIG-KEY-NAME:BASE64-SECRET", sec)
		}
		cfg.DNSSecondaries = append(cfg.DNSSecondaries, dnsserver.Secondary{KeyName: name, Secret: secret})
	}
	for _, p := range o.prices {
		tld, amount, ok := strings.Cut(p, "=")
		usd, err := strconv.ParseFloat(amount, 64)
		if _, known := registrar.Lookup(strings.TrimPrefix(tld, ".")); !ok || err != nil || usd <= 0 || !known {
			return fmt.Errorf("--registrar-price %q: want TLD=USD for a TLD in the catalog, such as dev=14.00", p)
		}
		if cfg.RegistrarPrices == nil {
			cfg.RegistrarPrices = registrar.PriceList{}
		}
		cfg.RegistrarPrices[strings.TrimPrefix(tld, ".")] = money.FromUSD(usd)
	}
	cfg.MailRelays = o.mailRelays
	if cfg.SMTPRelay != "" && len(cfg.MailRelays) == 0 {
		log.Warn("outbound mail goes through --smtp-relay, but no --mail-relays are named: SPF publishes -all and relayed mail passes DMARC by DKIM alone")
	}
	sn, err := netip.ParsePrefix(o.sandboxNetwork)
	if err != nil || !sn.Addr().Is4() || sn.Bits() > 30 {
		return fmt.Errorf("--sandbox-network %q: want an IPv4 prefix of /30 or larger, such as 10.209.0.0/16", o.sandboxNetwork)
	}
	cfg.SandboxNetwork = sn.Masked()
	for _, v := range o.sandboxPeers {
		p, err := netip.ParsePrefix(v)
		if a, aerr := netip.ParseAddr(v); aerr == nil {
			p, err = a.Prefix(a.BitLen())
		}
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("--sandbox-peers %q: want IPv4 addresses or prefixes of the other replicas' hosts, such as 10.0.0.0/24", v)
		}
		cfg.SandboxPeers = append(cfg.SandboxPeers, p.Masked())
	}
	cfg.DisableEdgeFastPath = !o.edgeFastPath
	return nil
}

// parseRateLimits is the default buckets with the --rate-limit overrides.
func parseRateLimits(overrides []string) (map[string]RateLimit, error) {
	limits := map[string]RateLimit{}
	for k, v := range DefaultRateLimits {
		limits[k] = v
	}
	for _, l := range overrides {
		class, rest, ok1 := strings.Cut(l, "=")
		perSec, burst, ok2 := strings.Cut(rest, ":")
		ps, err1 := strconv.ParseFloat(perSec, 64)
		b, err2 := strconv.Atoi(burst)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || ps <= 0 || b < 1 {
			return nil, fmt.Errorf("--rate-limit %q: want CLASS=PER_SECOND:BURST, such as search=20:60", l)
		}
		limits[class] = RateLimit{PerSecond: ps, Burst: b}
	}
	return limits, nil
}

// bindListenFlags binds the listeners, the public URLs, the database,
// certificates and the bounds on connections.
func bindListenFlags(f *pflag.FlagSet, o *serverOptions) {
	f.StringVar(&o.cfg.DataDir, "data-dir", DefaultDataDir(), "data directory (PIER_DATA_DIR)")
	f.StringVar(&o.cfg.HTTPAddr, "http-addr", env("PIER_HTTP_ADDR", "127.0.0.1:8080"), "API, pages and edge listener (PIER_HTTP_ADDR)")
	f.StringVar(&o.cfg.HTTPSAddr, "https-addr", env("PIER_HTTPS_ADDR", "127.0.0.1:8443"), "TLS listener (PIER_HTTPS_ADDR)")
	f.StringVar(&o.cfg.HTTP3Addr, "http3-addr", env("PIER_HTTP3_ADDR", ""), "HTTP/3 (QUIC) listener, UDP; default the TLS listener's address and port, off for none (PIER_HTTP3_ADDR)")
	f.StringVar(&o.cfg.DNSAddr, "dns-addr", env("PIER_DNS_ADDR", "127.0.0.1:5353"), "DNS listener (PIER_DNS_ADDR)")
	f.StringVar(&o.cfg.SMTPAddr, "smtp-addr", env("PIER_SMTP_ADDR", "127.0.0.1:2525"), "SMTP listener (PIER_SMTP_ADDR)")
	f.StringVar(&o.cfg.BaseURL, "base-url", env("PIER_BASE_URL", ""), "public base URL (PIER_BASE_URL; default derived from --http-addr)")
	f.StringVar(&o.cfg.APIURL, "api-url", env("PIER_API_URL", ""), "MCP host URL (PIER_API_URL; default the base URL)")
	f.StringVar(&o.cfg.DatabaseURL, "database-url", env("PIER_DATABASE_URL", ""), "PostgreSQL URL (PIER_DATABASE_URL; default SQLite in the data directory)")
	f.StringVar(&o.cfg.PreviewDomain, "preview-domain", env("PIER_PREVIEW_DOMAIN", "localhost"), "zone preview hosts live under (PIER_PREVIEW_DOMAIN)")
	f.StringVar(&o.cfg.ACMEDirectory, "acme-directory", env("PIER_ACME_DIRECTORY", ""), "ACME directory URL to obtain certificates from instead of the local CA (PIER_ACME_DIRECTORY)")
	f.StringVar(&o.cfg.ACMEEmail, "acme-email", env("PIER_ACME_EMAIL", ""), "contact address of the ACME account (PIER_ACME_EMAIL)")
	f.StringVar(&o.cfg.ACMECAFile, "acme-ca-file", env("PIER_ACME_CA_FILE", ""), "PEM bundle to trust for the ACME server's own TLS (PIER_ACME_CA_FILE)")
	f.BoolVar(&o.edgeFastPath, "edge-fast-path", env("PIER_EDGE_FAST_PATH", "true") != "false", "serve the edge's plain GET and HEAD requests without net/http (PIER_EDGE_FAST_PATH)")
	f.StringSliceVar(&o.cfg.TrustedProxies, "trusted-proxies", envList("PIER_TRUSTED_PROXIES"), "CIDR prefixes of the proxies in front of this server (a load balancer): only from them is the client taken from X-Forwarded-For (its rightmost untrusted hop) or a PROXY protocol v2 header (PIER_TRUSTED_PROXIES)")
	f.DurationVar(&o.cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to drain requests on shutdown")
	lim := DefaultListenLimits
	f.DurationVar(&o.cfg.Listen.HeaderTimeout, "header-timeout", lim.HeaderTimeout, "bound on a TLS handshake, a request head and a silent new connection")
	f.DurationVar(&o.cfg.Listen.ReadTimeout, "read-timeout", lim.ReadTimeout, "bound on reading a whole request, body included")
	f.DurationVar(&o.cfg.Listen.WriteTimeout, "write-timeout", lim.WriteTimeout, "bound on writing an answer")
	f.DurationVar(&o.cfg.Listen.IdleTimeout, "idle-timeout", lim.IdleTimeout, "how long a kept-alive connection may wait for its next request")
	f.IntVar(&o.cfg.Listen.MaxHeaderBytes, "max-header-bytes", lim.MaxHeaderBytes, "bound on a request's head, in bytes")
	f.IntVar(&o.cfg.DNS.RRLRate, "dns-rrl-rate", dnsserver.DefaultLimits.RRLRate, "UDP answers per second per source prefix (/24, /56) before response rate limiting; 0 turns it off")
	f.IntVar(&o.cfg.DNS.RRLSlip, "dns-rrl-slip", dnsserver.DefaultLimits.RRLSlip, "send every Nth rate-limited answer truncated, so real clients retry over TCP; 0 drops them all")
}

// bindServiceFlags binds the blob store, mail, the task runner and the
// sandbox of tenants' services.
func bindServiceFlags(f *pflag.FlagSet, o *serverOptions) {
	o.cfg.BlobStoreKey, o.cfg.BlobStoreSecret = env("AWS_ACCESS_KEY_ID", ""), env("AWS_SECRET_ACCESS_KEY", "")
	f.StringVar(&o.cfg.BlobStore, "blob-store", env("PIER_BLOB_STORE", ""), "keep blob bodies in an S3-compatible bucket, s3://BUCKET?endpoint=HOST:PORT (credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); default the database (PIER_BLOB_STORE)")
	f.StringVar(&o.cfg.SMTPRelay, "smtp-relay", env("PIER_SMTP_RELAY", ""), "smarthost for outbound mail, smtp://HOST:PORT; without one send_message is refused (PIER_SMTP_RELAY)")
	f.Int64Var(&o.cfg.SMTPMaxMessageBytes, "smtp-max-message-bytes", 10<<20, "bound on an inbound message, in bytes")
	f.DurationVar(&o.cfg.TaskJobTimeout, "task-job-timeout", 2*time.Minute, "bound on one run of a durable task")
	f.DurationVar(&o.cfg.TaskLease, "task-lease", tasks.DefaultLeaseTTL, "how long a running task's lease outlives its last renewal (every third of it): a replica that dies mid-run leaves its task to another after this and a 5 s sweep at most")
	f.Float64Var(&o.cfg.SMTPPeerRate, "smtp-peer-rate", 10, "inbound messages (and refused commands) per second one source network, a /24 or /64, may send")
	f.IntVar(&o.cfg.SMTPSessions.Total, "smtp-sessions", 100, "SMTP sessions open at once")
	f.IntVar(&o.cfg.SMTPSessions.PerNetwork, "smtp-network-sessions", 10, "SMTP sessions open at once from one source network, a /24 or /64")
	f.StringSliceVar(&o.mailRelays, "mail-relays", envList("PIER_MAIL_RELAYS"), "the relays that send outbound mail, named in hosted domains' SPF: addresses, prefixes, host names or ip4:/ip6:/a:/include: mechanisms; none publishes v=spf1 -all (PIER_MAIL_RELAYS)")
	f.StringVar(&o.sandboxNetwork, "sandbox-network", env("PIER_SANDBOX_NETWORK", DefaultSandboxNetwork.String()), "the prefix tenant sandboxes take their addresses from; mail from it never passes SPF (PIER_SANDBOX_NETWORK)")
	f.StringSliceVar(&o.sandboxPeers, "sandbox-peers", envList("PIER_SANDBOX_PEERS"), "addresses or CIDR prefixes of the other replicas' hosts, allowed through the firewall to this host's sandboxes' app port so their edges reach the services it runs; each must route --sandbox-network to this host (PIER_SANDBOX_PEERS)")
	f.Int64Var(&o.cfg.InboxBytes, "inbox-bytes", 50<<20, "bound on each inbox's stored messages, in bytes")
	f.StringVar(&o.cfg.AppsDir, "apps-dir", env("PIER_APPS_DIR", ""), "where running services' versions get their working directories; default: a directory in the temporary directory (PIER_APPS_DIR)")
	f.BoolVar(&o.cfg.UnsandboxedServices, "unsandboxed-services", env("PIER_UNSANDBOXED_SERVICES", "") == "true", "LOCAL DEVELOPMENT ONLY: where no sandbox can be set up (runc, root, cgroups, nftables), run process and worker services as bare processes that share the host, instead of refusing them (PIER_UNSANDBOXED_SERVICES=true)")
	f.Int64Var(&o.cfg.ServiceLimits.MemoryBytes, "service-memory-bytes", runner.DefaultLimits.MemoryBytes, "memory of all of a running version's processes together")
	f.Int64Var(&o.cfg.ServiceLimits.CPUMillis, "service-cpu-millis", runner.DefaultLimits.CPUMillis, "CPU bandwidth of a running version (1000 is one CPU)")
	f.Int64Var(&o.cfg.ServiceLimits.Processes, "service-processes", runner.DefaultLimits.Processes, "processes and threads of a running version together")
	f.Int64Var(&o.cfg.ServiceLimits.DiskBytes, "service-disk-bytes", runner.DefaultLimits.DiskBytes, "a running version's own directory, its files included")
}

// bindLimitFlags binds the managed databases, supervision, quotas, rate
// limits, logging and the hidden flags of the crash tests.
func bindLimitFlags(f *pflag.FlagSet, o *serverOptions) {
	f.StringVar(&o.cfg.PostgresAdminURL, "postgres-admin-url", env("PIER_POSTGRES_ADMIN_URL", ""), "a PostgreSQL URL allowed to create roles and databases; enables the managed_postgres add-on (PIER_POSTGRES_ADMIN_URL)")
	f.DurationVar(&o.cfg.Supervision.StopGrace, "stop-grace", 10*time.Second, "how long a stopping service's process has between SIGTERM and SIGKILL")
	f.DurationVar(&o.cfg.Supervision.Drain, "drain", 3*time.Second, "how long a replaced version keeps serving its requests in flight after traffic switched to the new one")
	f.Int64Var(&o.cfg.ServiceLogLines, "service-log-lines", 5000, "log lines kept per service (the oldest go first)")
	f.DurationVar(&o.cfg.MeterInterval, "meter-interval", durationEnv("PIER_METER_INTERVAL", time.Minute), "how often running services are metered, budget periods rolled over and budget notices sent (PIER_METER_INTERVAL)")
	f.StringArrayVar(&o.prices, "registrar-price", nil, "the sandbox registrar's first-year price for a TLD, as TLD=USD; repeatable")
	f.StringArrayVar(&o.secondaries, "dns-secondary", nil, "a secondary allowed zone transfers, as TSIG-KEY-NAME:BASE64-SECRET (hmac-sha256); repeatable")
	f.IntVar(&o.cfg.Quotas.Services, "quota-services", service.DefaultQuotas.Services, "live services an organisation may have")
	f.IntVar(&o.cfg.Quotas.Bundles, "quota-bundles", service.DefaultQuotas.Bundles, "bundles an organisation may store")
	f.Int64Var(&o.cfg.Quotas.StorageBytes, "quota-storage-bytes", service.DefaultQuotas.StorageBytes, "bytes an organisation's bundles may hold")
	f.Int64Var(&o.cfg.Edge.HotCacheBytes, "edge-cache-bytes", edge.DefaultLimits.HotCacheBytes, "bound on the file bodies the edge keeps in memory, across every site")
	f.StringArrayVar(&o.limits, "rate-limit", nil, "override a rate-limit bucket per caller: CLASS=PER_SECOND:BURST (classes: search, quotes, signup, mcp)")
	f.StringVar(&o.logLevel, "log-level", env("PIER_LOG_LEVEL", "info"), "debug, info, warn or error (PIER_LOG_LEVEL)")
	f.StringVar(&o.logFormat, "log-format", env("PIER_LOG_FORMAT", "text"), "text or json (PIER_LOG_FORMAT)")
	// Crash tests hold a launch at a step; the flags are hidden.
	f.StringVar(&o.cfg.StepPause.After, "test-pause-after-step", env("PIER_TEST_PAUSE_AFTER_STEP", ""), "crash tests: hold launches once this step is done (PIER_TEST_PAUSE_AFTER_STEP)")
	f.StringVar(&o.cfg.StepPause.Inside, "test-pause-inside-step", env("PIER_TEST_PAUSE_INSIDE_STEP", ""), "crash tests: hold launches inside this step (PIER_TEST_PAUSE_INSIDE_STEP)")
	for _, name := range []string{"test-pause-after-step", "test-pause-inside-step"} {
		if err := f.MarkHidden(name); err != nil {
			panic(err)
		}
	}
}

func newLogger(w interface{ Write([]byte) (int, error) }, level, format string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Local operator commands that act on the data directory directly",
	}
	var dataDir, databaseURL, name, org string
	var scopes []string
	var asJSON bool
	create := &cobra.Command{
		Use:   "create-key",
		Short: "Create an API key for the local operator's organisation",
		Long: `Create an API key and print it once. The key is stored only as a hash;
it cannot be shown again. Without an organisation one named "local" is
created on first use.`,
		Example: `  pier admin create-key
  pier admin create-key --name ci --scopes read,quote
  export PIER_API_KEY=$(pier admin create-key --json | jq -r .apiKey)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, s := range scopes {
				if !validScope(s) {
					return fmt.Errorf("unknown scope %q; scopes are %s", s, strings.Join(auth.Scopes, ", "))
				}
			}
			ctx := cmd.Context()
			st, note, err := openAdminStore(cmd, &dataDir, databaseURL)
			if err != nil {
				return err
			}
			defer st.Close()
			now := time.Now()
			o, err := orgFor(ctx, st, org, now)
			if err != nil {
				return err
			}
			k, err := createKey(ctx, st, o.ID, name, scopes, now)
			if err != nil {
				return err
			}
			secret := k.Secret
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
					"apiKey": secret, "keyId": k.ID, "organizationId": o.ID, "scopes": scopes, "dataDir": dataDir,
				})
			}
			fmt.Fprintln(cmd.OutOrStdout(), secret)
			fmt.Fprintf(cmd.ErrOrStderr(), "Created key %s for organisation %s with scopes %s (%s).\nIt is shown once; store it now, for example: export PIER_API_KEY=%s\n",
				k.ID, o.ID, strings.Join(scopes, ","), note, secret)
			return nil
		},
	}
	cf := create.Flags()
	cf.StringVar(&dataDir, "data-dir", DefaultDataDir(), "data directory (PIER_DATA_DIR)")
	cf.StringVar(&databaseURL, "database-url", env("PIER_DATABASE_URL", ""), "PostgreSQL URL (PIER_DATABASE_URL)")
	cf.StringVar(&name, "name", "local", "a name to recognise the key by")
	cf.StringVar(&org, "org", "", "organisation id (default: the first, created if none)")
	cf.StringSliceVar(&scopes, "scopes", []string{"read", "quote", "launch"}, "scopes: "+strings.Join(auth.Scopes, ", "))
	cf.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(create, newSignInLinkCmd(), newCreateProjectCmd())
	return cmd
}

// openAdminStore opens the store an admin command acts on. The admin
// commands read the data directory, not the running server, so a
// directory that does not exist is named and refused rather than created
// empty: it is another HOME, a typo, or a server not started yet.
//
// The directory is the one --data-dir or PIER_DATA_DIR names, else the
// running server's, else the default (adminDataDir); dataDir is set to it
// and the returned note names it and why, for the command's output.
func openAdminStore(cmd *cobra.Command, dataDir *string, databaseURL string) (*store.Store, string, error) {
	how := adminDataDir(cmd, dataDir, databaseURL)
	note := dataDirNote(*dataDir, databaseURL, how)
	if databaseURL == "" {
		if _, err := os.Stat(*dataDir); errors.Is(err, os.ErrNotExist) {
			return nil, note, fmt.Errorf("no Pier data directory at %s (%s): pier admin acts on the server's data directory and creates none; "+
				"start the server first (pier server creates it), or name the server's with --data-dir or PIER_DATA_DIR", *dataDir, how)
		}
	}
	st, err := store.Open(cmd.Context(), *dataDir, databaseURL)
	if err != nil {
		return nil, note, fmt.Errorf("%s: %w", note, err)
	}
	return st, note, nil
}

// dataDirOf names where an admin command's data is, for its messages.
func dataDirOf(dataDir, databaseURL string) string {
	if databaseURL != "" {
		return dataDir + " (database: PostgreSQL)"
	}
	return dataDir
}

func validScope(s string) bool {
	for _, v := range auth.Scopes {
		if v == s {
			return true
		}
	}
	return false
}

func orgFor(ctx context.Context, st *store.Store, id string, now time.Time) (store.Organization, error) {
	if id != "" {
		return store.Organization{ID: id}, nil
	}
	o, err := st.Accounts().FirstOrganization(ctx)
	if err == store.ErrNotFound {
		if o, err = st.Accounts().CreateOrganization(ctx, auth.ID("org"), "local", now); err != nil {
			return o, err
		}
		return o, ensureLocalProject(ctx, st, o.ID)
	}
	return o, err
}

// writeCAJSON writes the root certificate as JSON: the PEM, and what a
// person compares before trusting it (its subject, validity and SHA-256
// fingerprint, as browsers show it).
func writeCAJSON(w io.Writer, rootPEM []byte) error {
	block, _ := pem.Decode(rootPEM)
	if block == nil {
		return errors.New("pier ca: the CA's root certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("pier ca: the CA's root certificate: %w", err)
	}
	sum := sha256.Sum256(cert.Raw)
	hexes := make([]string, len(sum))
	for i, b := range sum {
		hexes[i] = fmt.Sprintf("%02X", b)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{
		"certificatePem":    string(rootPEM),
		"subject":           cert.Subject.String(),
		"notBefore":         cert.NotBefore.UTC(),
		"notAfter":          cert.NotAfter.UTC(),
		"sha256Fingerprint": strings.Join(hexes, ":"),
	})
}

func newCACmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Print the local certificate authority's root certificate",
		Long: `Print the PEM root certificate of the local CA that signs the server's
HTTPS certificates (preview hosts and launched domains). Give it to clients
to trust, for example curl --cacert.`,
		Example: `  pier ca > pier-ca.pem
  curl --cacert pier-ca.pem https://site--prj-abc.localhost:8443/
  pier ca --json | jq -r .sha256Fingerprint`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			how := adminDataDir(cmd, &dataDir, "")
			if _, err := os.Stat(dataDir); err != nil {
				return fmt.Errorf("no Pier data directory at %s (%s): pier ca reads the CA the server keeps there; start the server first, or name its directory with --data-dir or PIER_DATA_DIR", dataDir, how)
			}
			ca, err := tlsca.LoadOrCreate(CADir(dataDir), nil)
			if err != nil {
				return err
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				return writeCAJSON(cmd.OutOrStdout(), ca.RootPEM())
			}
			_, err = cmd.OutOrStdout().Write(ca.RootPEM())
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", DefaultDataDir(), "data directory (PIER_DATA_DIR)")
	return cmd
}
