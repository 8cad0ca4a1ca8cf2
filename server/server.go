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
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/pierhq/pier/openapi"
	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/mcp"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/sandbox"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/tasks"
	"github.com/pierhq/pier/server/internal/web"
	"github.com/pierhq/pier/server/internal/zone"
)

// Config is the server's settings. Each has a flag and an environment
// variable (see the README).
type Config struct {
	DataDir       string
	HTTPAddr      string
	HTTPSAddr     string
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
	// TaskJobTimeout bounds one run of a durable task.
	TaskJobTimeout time.Duration
	// MCPAllowedOrigins are browser origins allowed to call /mcp besides the
	// base and API URLs and loopback pages of this server.
	MCPAllowedOrigins []string
	// RateLimits overrides the default buckets per class.
	RateLimits map[string]ratelimit.Policy
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
	// StepPause holds launches at a step, for the crash tests
	// (PIER_TEST_PAUSE_AFTER_STEP, PIER_TEST_PAUSE_INSIDE_STEP).
	StepPause service.StepPause
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

// DefaultDataDir is $PIER_DATA_DIR, else ~/.local/share/pier.
func DefaultDataDir() string {
	if d := os.Getenv("PIER_DATA_DIR"); d != "" {
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
	if c.EdgeIPv4 == "" {
		c.EdgeIPv4 = "127.0.0.1"
	}
	if c.EdgeIPv6 == "" {
		c.EdgeIPv6 = "::1"
	}
}

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
	svc     *service.Service
	sandbox *sandbox.Service
	launch  *launchParts
	http    *http.Server
	ln      net.Listener
}

// New opens the store and builds the handlers; Serve starts listening.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	cfg.setDefaults()
	if log == nil {
		log = slog.Default()
	}
	st, err := store.Open(ctx, cfg.DataDir, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, store: st}
	if err := s.openSandbox(ctx); err != nil {
		st.Close()
		return nil, err
	}
	if err := s.build(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) build(ctx context.Context) error {
	caaIssuers, err := s.buildLaunch()
	if err != nil {
		return err
	}
	svc := service.New(service.Config{
		Store:         s.store,
		Now:           s.cfg.Now,
		Log:           s.log,
		BaseURL:       s.BaseURL,
		Platform:      platform{s},
		PreviewDomain: s.cfg.PreviewDomain,
		Zone: zone.ZoneConfig{
			EdgeIPv4:   net.ParseIP(s.cfg.EdgeIPv4),
			EdgeIPv6:   net.ParseIP(s.cfg.EdgeIPv6),
			CAAIssuers: caaIssuers,
		},
		Pause:  s.cfg.StepPause,
		Quotas: s.cfg.Quotas,
	})
	s.svc = svc
	s.launch.runner, err = tasks.New(ctx, s.store, s.cfg.DatabaseURL, svc.Launches.RunTask, tasks.Config{
		JobTimeout: s.cfg.TaskJobTimeout,
		Log:        s.log,
		OnGiveUp:   svc.Launches.FailTask,
	})
	if err != nil {
		return err
	}
	authz := s.newOAuth()
	// The MCP endpoint dispatches tool calls to the REST handler it is
	// mounted in, so it is built once that handler exists.
	var mcpHandler http.Handler
	limiter := ratelimit.New(s.cfg.RateLimits, s.cfg.Now)
	api, err := httpapi.New(httpapi.Config{
		Tokens:  authz,
		Service: svc,
		Store:   s.store,
		Limiter: limiter,
		Log:     s.log,
		Now:     s.cfg.Now,
		BaseURL: s.BaseURL,
		Sandbox: s.sandbox,
		Extra: map[string]http.Handler{"mcp": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mcpHandler.ServeHTTP(w, r)
		})},
	})
	if err != nil {
		return err
	}
	mcpHandler, err = mcp.New(mcp.Config{
		REST:           api,
		Log:            s.log,
		AllowedOrigins: append([]string{s.cfg.BaseURL, s.cfg.APIURL}, s.cfg.MCPAllowedOrigins...),
		Authenticate:   mcpCredentials(api),
		Challenge:      authz.Challenge,
		Limiter:        limiter,
	})
	if err != nil {
		return err
	}
	mux := api.Mux()
	if err := web.Mount(mux, web.Config{Service: svc, Log: s.log, OAuth: authz}); err != nil {
		return err
	}
	authz.Mount(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.store.DB().PingContext(r.Context()); err != nil {
			httpapi.WriteError(w, r, s.log, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","engine":%q,"build":%q}`+"\n", s.store.Engine(), buildID)
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
	s.handler = logRequests(s.log, s.route(api))
	return nil
}

// Handler returns the HTTP handler, for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.handler }

// Service returns the domain layer, for tests and local operator commands.
func (s *Server) Service() *service.Service { return s.svc }

// Store returns the store.
func (s *Server) Store() *store.Store { return s.store }

// Listen binds the HTTP listener; Addr then reports the bound address.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.HTTPAddr, err)
	}
	s.ln = ln
	return s.listenLaunch(context.Background())
}

// Addr is the bound HTTP address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

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

// Serve serves until ctx ends, then drains in-flight requests for up to
// ShutdownTimeout and closes the store.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	lim := s.cfg.Listen
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: lim.HeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(s.edgeListener(s.ln, nil)) }()
	go s.purgeLoop(ctx)
	if err := s.serveLaunch(ctx, s.handler); err != nil {
		s.http.Close()
		s.store.Close()
		return err
	}
	s.log.Info("pier serving", "url", s.BaseURL(), "engine", s.store.Engine(), "data_dir", s.cfg.DataDir)

	select {
	case err := <-errc:
		s.store.Close()
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := s.http.Shutdown(sctx)
	if lerr := s.stopLaunch(sctx); err == nil {
		err = lerr
	}
	if cerr := s.store.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// purgeLoop drops expired idempotency records hourly.
func (s *Server) purgeLoop(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := s.store.Idempotency().Purge(ctx, s.cfg.Now()); err != nil {
				s.log.Warn("purging idempotency records", "err", err)
			} else if n > 0 {
				s.log.Info("purged idempotency records", "count", n)
			}
			s.purgeOAuth(ctx)
		}
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func logRequests(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if log.Enabled(r.Context(), slog.LevelDebug) || sw.status >= 500 && sw.status != http.StatusNotImplemented {
			log.Log(r.Context(), levelFor(sw.status), "request", "method", r.Method, "path", r.URL.Path,
				"status", sw.status, "dur", time.Since(start), "ua", strings.SplitN(r.UserAgent(), " ", 2)[0])
		}
	})
}

func levelFor(status int) slog.Level {
	if status >= 500 && status != http.StatusNotImplemented {
		return slog.LevelError
	}
	return slog.LevelDebug
}

// RateLimit is one token bucket policy: a refill rate and a size.
type RateLimit = ratelimit.Policy

// buildID names the binary serving: its module version and the VCS
// revision it was built from, as `go build` stamps them. Conformance
// reports record it as target.buildId.
var buildID = func() string {
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
}()
