// Package testserver is the one harness every package's tests use to run a
// real Pier: on loopback ports, with a fresh data directory, on SQLite or on
// a throwaway PostgreSQL database, stopped when the test ends.
package testserver

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server"
)

// Server is a running Pier.
type Server struct {
	*server.Server
	// URL is the API's base URL, http://127.0.0.1:port.
	URL string
	// Client sends requests and checks every answer against the contract.
	Client *contracttest.Client

	stop func()
}

// Stop shuts the server down and waits for it, as the end of the test
// would; a test that restarts a server on the same data stops it first.
func (s *Server) Stop() { s.stop() }

// Start serves a real Pier for the test. An empty DataDir becomes a
// temporary directory and the listeners take free loopback ports; the
// server's warnings go to the test's log. The meter's pass does not run
// on its own unless cfg.MeterInterval asks for it: a test whose clock
// crosses a month would otherwise see budgets roll over under it; tests of
// the meter run the pass themselves.
func Start(t testing.TB, cfg server.Config) *Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.MeterInterval == 0 {
		cfg.MeterInterval = -1
	}
	log := slog.New(slog.NewTextHandler(LogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, serveStop, err := Serve(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := serveStop(); err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	url := "http://" + s.Addr()
	ts := &Server{Server: s, URL: url, stop: stop}
	if tt, ok := t.(*testing.T); ok {
		ts.Client = &contracttest.Client{T: tt, BaseURL: url}
	}
	return ts
}

// Serve builds a Pier from cfg, binds its listeners (free loopback ports
// when HTTPAddr is empty) and serves it until stop, which waits for the
// server to end and returns what Serve did; call it once. Start is built
// on it; callers
// without a testing.TB (testscript's Setup) or that want their own log
// (benchmarks) use it directly. A nil log is slog.Default().
func Serve(cfg server.Config, log *slog.Logger) (s *server.Server, stop func() error, err error) {
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	cfg.UnsandboxedServices = cfg.UnsandboxedServices || !SandboxRequired()
	ctx, cancel := context.WithCancel(context.Background())
	s, err = server.New(ctx, cfg, log)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if err := s.Listen(); err != nil {
		cancel()
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	return s, func() error { cancel(); return <-done }, nil
}

// SandboxRequired: CI (PIER_TEST_SANDBOX=require) runs every service in
// its sandbox and fails where there is none; elsewhere the servers tests
// start fall back to bare processes where no sandbox can be had.
func SandboxRequired() bool { return os.Getenv("PIER_TEST_SANDBOX") == "require" }

// New builds a Pier from cfg without listening, for tests, fuzz targets
// and benchmarks that serve its Handler themselves (httptest, a
// recorder). An empty DataDir becomes a temporary directory; the store
// closes when the test ends. A nil log is slog.Default().
func New(t testing.TB, cfg server.Config, log *slog.Logger) *server.Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.UnsandboxedServices = cfg.UnsandboxedServices || !SandboxRequired()
	s, err := server.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Store().Close() })
	return s
}

// Key creates an organisation with an agent key holding scopes and
// returns the key's secret.
func (s *Server) Key(t testing.TB, scopes ...string) string {
	t.Helper()
	k, err := s.CreateOrganizationWithKey(context.Background(), "test", scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return k.Secret
}

// Engines runs f against SQLite and against a real PostgreSQL; the
// PostgreSQL run is skipped, or fails under PIER_TEST_POSTGRES=require,
// when the machine has none. The package's TestMain must call testpg.Run.
func Engines(t *testing.T, f func(t *testing.T, databaseURL string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, "") })
	t.Run("postgres", func(t *testing.T) { f(t, testpg.NewDatabase(t)) })
}

// Clock is a clock the test moves; pass its Now as server.Config.Now.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// LogWriter sends lines to the test's log while the test runs. Background
// goroutines that log after it ended are dropped: testing panics on a
// late Log.
func LogWriter(t testing.TB) *Writer {
	w := &Writer{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return w
}

// Writer is LogWriter's writer.
type Writer struct {
	t    testing.TB
	done atomic.Bool
}

func (w *Writer) Write(b []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSpace(string(b)))
	}
	return len(b), nil
}
