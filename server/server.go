package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pierhq/pier/openapi"
	"github.com/pierhq/pier/server/internal/clientaddr"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/mcp"
	"github.com/pierhq/pier/server/internal/oauth"
	"github.com/pierhq/pier/server/internal/objstore"
	"github.com/pierhq/pier/server/internal/pgaddon"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/runner"
	"github.com/pierhq/pier/server/internal/sandbox"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/smtpd"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/tasks"
	"github.com/pierhq/pier/server/internal/web"
	"github.com/pierhq/pier/server/internal/workflow"
	"github.com/pierhq/pier/server/internal/zone"
)

// baseURLFor derives a URL from a listen address, naming localhost for
// loopback and unspecified hosts.
func baseURLFor(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "127.0.0.1" || host == "::1" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Server is a running Pier.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   *store.Store
	handler http.Handler
	// trusted are the proxies whose word on the client is taken.
	trusted *clientaddr.Trusted
	svc     *service.Service
	sandbox *sandbox.Service
	// workflows prepares, applies and runs workflows.
	workflows *workflow.Engine
	launch    *launchParts
	// sup runs the processes of process and worker services.
	sup  *runner.Supervisor
	http *http.Server
	ln   net.Listener
	// api is the REST handler, which the listeners' fast path asks for
	// kept answers (apiRead), and mcp the MCP endpoint, which it asks to
	// answer reads; apiFast counts the answers they gave.
	api     *httpapi.Handler
	mcp     *mcp.Handler
	apiFast atomic.Int64
	// quotes answers create_quote on the fast path (nil when it may not).
	quotes *httpapi.QuoteDoor
}

// New opens the store and builds the handlers; Serve starts listening.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	cfg.setDefaults()
	if log == nil {
		log = slog.Default()
	}
	trusted, err := clientaddr.Parse(cfg.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("--trusted-proxies: %w", err)
	}
	var opts []store.Option
	if cfg.BlobStore != "" {
		o, err := objstore.Open(ctx, cfg.BlobStore, cfg.BlobStoreKey, cfg.BlobStoreSecret)
		if err != nil {
			return nil, err
		}
		opts = append(opts, store.WithObjects(o))
	}
	st, err := store.Open(ctx, cfg.DataDir, cfg.DatabaseURL, opts...)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, store: st, trusted: trusted}
	if s.sandbox, err = openSandbox(ctx, cfg, st, log, s.BaseURL); err != nil {
		st.Close()
		return nil, err
	}
	if err := s.build(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return s, nil
}

// taskWork works durable tasks by kind: workflows in the workflow engine,
// the rest (launches, teardowns) in the domain.
type taskWork struct {
	store     *store.Store
	workflows *workflow.Engine
	launches  *service.Launches
	log       *slog.Logger
}

// run works one durable task.
func (w taskWork) run(ctx context.Context, taskID string) error {
	t, err := w.store.Tasks().GetAnyOrg(ctx, taskID)
	if err != nil {
		return err
	}
	if t.Kind == "workflow" {
		return w.workflows.Run(ctx, t)
	}
	return w.launches.RunTask(ctx, taskID)
}

// fail ends a task whose runs kept failing.
func (w taskWork) fail(ctx context.Context, taskID string, cause error) {
	if t, err := w.store.Tasks().GetAnyOrg(ctx, taskID); err == nil && t.Kind == "workflow" {
		if err := w.workflows.Fail(ctx, t, cause); err != nil {
			w.log.Error("failing workflow task", "task", taskID, "err", err)
		}
		return
	}
	w.launches.FailTask(ctx, taskID, cause)
}

func (s *Server) build(ctx context.Context) error {
	caaIssuers, err := s.buildLaunch()
	if err != nil {
		return err
	}
	mailSenders, relay, err := mailRouting(s.cfg, hostOf(s.BaseURL()))
	if err != nil {
		return err
	}
	if err := os.Chmod(s.cfg.DataDir, 0o700); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("data directory: %w", err)
	}
	if s.sup, err = newSupervisor(s); err != nil {
		return err
	}
	var databases service.Databases
	if s.cfg.PostgresAdminURL != "" {
		pg, err := pgaddon.New(s.cfg.PostgresAdminURL)
		if err != nil {
			return err
		}
		databases = pg
	}
	svc := newService(s, zone.ZoneConfig{
		EdgeIPv4:    net.ParseIP(s.cfg.EdgeIPv4),
		EdgeIPv6:    net.ParseIP(s.cfg.EdgeIPv6),
		CAAIssuers:  caaIssuers,
		MailSenders: mailSenders,
	}, relay, databases)
	s.svc = svc
	var mcpH *mcp.Handler
	s.workflows = workflow.New(workflow.Config{
		Store: s.store, Service: svc, Now: s.cfg.Now, Log: s.log, PauseAfter: s.cfg.StepPause.After, PauseInside: s.cfg.StepPause.Inside,
		Invoker: func() workflow.Invoker { return mcpH },
		Enqueue: platform{s}.Enqueue,
	})
	if s.launch.runner, err = newTaskRunner(ctx, s, svc); err != nil {
		return err
	}
	authz := newOAuth(s.store, s.log, s.cfg.Now, s.BaseURL, s.MCPURL)
	api, mcpH, err := newHandlers(s, svc, authz)
	if err != nil {
		return err
	}
	mux := api.Mux()
	if err := web.Mount(mux, web.Config{Service: svc, Log: s.log, OAuth: authz}); err != nil {
		return err
	}
	authz.Mount(mux)
	mountContract(mux, s.store, s.log)
	s.api, s.mcp, s.quotes = api, mcpH, httpapi.CreateQuoteDoor(api)
	s.handler = clientaddr.Middleware(s.trusted, logRequests(s.log, s.route(api)))
	return nil
}

// mailRouting is what the mail setup needs of the command's
// configuration: the SPF mechanisms of the relays that send for hosted
// domains, and the relay outbound mail goes through, if any.
func mailRouting(cfg Config, host string) ([]string, service.MailRelay, error) {
	var mailSenders []string
	for _, r := range cfg.MailRelays {
		m, err := service.SPFMechanism(r)
		if err != nil {
			return nil, nil, fmt.Errorf("mail relays: %w", err)
		}
		mailSenders = append(mailSenders, m)
	}
	if cfg.SMTPRelay == "" {
		return mailSenders, nil, nil
	}
	r, err := smtpd.NewRelay(cfg.SMTPRelay, host)
	if err != nil {
		return nil, nil, err
	}
	return mailSenders, r, nil
}

// newSupervisor starts the supervisor of process and worker services and
// says how they are isolated, loudly when they are not.
func newSupervisor(s *Server) (*runner.Supervisor, error) {
	appsDir := s.cfg.AppsDir
	if appsDir == "" {
		appsDir = appsDirFor(s.cfg.DataDir)
	}
	sv := s.cfg.Supervision
	sup, err := runner.New(runner.Config{Dir: appsDir, Events: runEvents{s}, Now: s.cfg.Now,
		RestartBase: sv.RestartBase, RestartMax: sv.RestartMax, CrashRestarts: sv.CrashRestarts, CrashWindow: sv.CrashWindow, StopGrace: sv.StopGrace,
		Limits: s.cfg.ServiceLimits, Network: s.cfg.SandboxNetwork, Peers: s.cfg.SandboxPeers, AllowUnsandboxed: s.cfg.UnsandboxedServices})
	if err != nil {
		return nil, err
	}
	switch isolation, err := sup.Isolation(); {
	case err != nil:
		s.log.Warn("process and worker services cannot run here: their launches are refused", "missing", err.Error())
	case !sup.Sandboxed():
		s.log.Warn("SERVICES RUN UNSANDBOXED: --unsandboxed-services lets tenants' code share this host with no isolation; for local development only", "isolation", isolation)
	default:
		s.log.Info("services run sandboxed", "isolation", isolation)
		edge.SetUpstreamDialer(runner.DialVersion)
	}
	return sup, nil
}

// newService builds the domain layer over the server's store, supervisor
// and configuration.
func newService(s *Server, z zone.ZoneConfig, relay service.MailRelay, databases service.Databases) *service.Service {
	return service.New(service.Config{
		Store:         s.store,
		Now:           s.cfg.Now,
		Log:           s.log,
		BaseURL:       s.BaseURL,
		Platform:      platform{s},
		PreviewDomain: s.cfg.PreviewDomain,
		Zone:          z,
		Pause:         s.cfg.StepPause,
		Quotas:        s.cfg.Quotas,
		Prices:        s.cfg.RegistrarPrices,
		Relay:         relay,
		InboxBytes:    s.cfg.InboxBytes,
		Runtime:       runtime{sup: s.sup, store: s.store, id: runnerID(s.cfg.DataDir)},
		Databases:     databases,
		LogLines:      s.cfg.ServiceLogLines,
		Drain:         s.cfg.Supervision.Drain,
	})
}

// newTaskRunner runs the durable tasks: workflows by the workflow engine,
// the rest by the domain.
func newTaskRunner(ctx context.Context, s *Server, svc *service.Service) (*tasks.Runner, error) {
	work := taskWork{store: s.store, workflows: s.workflows, launches: svc.Launches, log: s.log}
	return tasks.New(ctx, s.store, s.cfg.DatabaseURL, work.run, tasks.Config{
		JobTimeout:      s.cfg.TaskJobTimeout,
		LeaseTTL:        s.cfg.TaskLease,
		MaxAttempts:     s.cfg.TaskRetries.MaxAttempts,
		RetryBackoff:    s.cfg.TaskRetries.Backoff,
		MaxRetryBackoff: s.cfg.TaskRetries.MaxBackoff,
		FetchPoll:       s.cfg.TaskRetries.Poll,
		Log:             s.log,
		OnGiveUp:        work.fail,
	})
}

// newHandlers builds the REST API and the MCP endpoint mounted in it.
func newHandlers(s *Server, svc *service.Service, authz *oauth.Server) (*httpapi.Handler, *mcp.Handler, error) {
	// The MCP endpoint dispatches tool calls to the REST handler it is
	// mounted in, so it is built once that handler exists.
	var mcpHandler http.Handler
	limiter := ratelimit.New(s.cfg.RateLimits, s.cfg.Now)
	if s.store.Engine() == store.Postgres {
		// Replicas on one database share their buckets.
		limiter.Shared = s.store.RateLimits()
		limiter.NoLease = s.cfg.RateLimitRowPerRequest
	}
	api, err := httpapi.New(httpapi.Config{
		Tokens:    authz,
		Service:   svc,
		Store:     s.store,
		Limiter:   limiter,
		Log:       s.log,
		Now:       s.cfg.Now,
		BaseURL:   s.BaseURL,
		Sandbox:   s.sandbox,
		Workflows: s.workflows,
		Versions:  versionedReads(s.store),
		Extra: map[string]http.Handler{"mcp": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mcpHandler.ServeHTTP(w, r)
		})},
	})
	if err != nil {
		return nil, nil, err
	}
	mcpH, err := mcp.New(mcp.Config{
		REST:           api,
		Log:            s.log,
		AllowedOrigins: append([]string{s.cfg.BaseURL, s.cfg.APIURL}, s.cfg.MCPAllowedOrigins...),
		Authenticate:   mcpCredentials(api),
		Challenge:      authz.Challenge,
		Limiter:        limiter,
	})
	if err != nil {
		return nil, nil, err
	}
	mcpHandler = mcpH
	return api, mcpH, nil
}

// mountContract serves the health check and the published contract: the
// OpenAPI document and its JSON Schemas.
func mountContract(mux *http.ServeMux, st *store.Store, log *slog.Logger) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := st.DB().PingContext(r.Context()); err != nil {
			httpapi.WriteError(w, r, log, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","engine":%q,"build":%q}`+"\n", st.Engine(), buildID())
	})
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Write(openapi.JSON)
	})
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(openapi.YAML)
	})
	schemas, _ := fs.Sub(openapi.Schemas, "schemas")
	mux.Handle("GET /schemas/", http.StripPrefix("/schemas/", http.FileServerFS(schemas)))
}

// Handler returns the HTTP handler, for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.handler }

// Service returns the domain layer, for tests and local operator commands.
func (s *Server) Service() *service.Service { return s.svc }

// Store returns the store.
func (s *Server) Store() *store.Store { return s.store }

// BaseURL is the public base URL.
func (s *Server) BaseURL() string {
	if s.cfg.BaseURL != "" {
		return s.cfg.BaseURL
	}
	if s.ln == nil {
		return baseURLFor(s.cfg.HTTPAddr)
	}
	return baseURLFor(s.Addr())
}

// purgeLoop drops expired idempotency records, OAuth records and
// rate-limit buckets hourly.
func purgeLoop(ctx context.Context, st *store.Store, now func() time.Time, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := st.Idempotency().Purge(ctx, now()); err != nil {
				log.Warn("purging idempotency records", "err", err)
			} else if n > 0 {
				log.Info("purged idempotency records", "count", n)
			}
			purgeOAuth(ctx, st, now(), log)
			if err := st.RateLimits().Purge(ctx, now()); err != nil {
				log.Warn("purging rate-limit buckets", "err", err)
			}
		}
	}
}

// buildID names the binary serving: its module version and the VCS
// revision it was built from, as `go build` stamps them. Conformance
// reports record it as target.buildId. Read on first use: parsing the
// build information at package init would cost every command of the binary.
var buildID = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	id := bi.Main.Version
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			id += "+" + s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			id += "-dirty"
		}
	}
	if id == "" {
		return "unknown"
	}
	return id
})
