package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/acme"
	"github.com/pierhq/pier/server/internal/clientaddr"
	"github.com/pierhq/pier/server/internal/edge/fastpath"
	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/mcp"
	"github.com/pierhq/pier/server/internal/smtpd"
	"github.com/pierhq/pier/server/internal/store"
)

// Listen binds the HTTP listener; Addr then reports the bound address.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.HTTPAddr, err)
	}
	s.ln = s.trusted.Listen(ln, s.cfg.Listen.HeaderTimeout)
	return s.listenLaunch(context.Background())
}

// Addr is the bound HTTP address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

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
	go func() { errc <- s.http.Serve(s.edgeListener(s.ln, nil, nil)) }()
	go purgeLoop(ctx, s.store, s.cfg.Now, s.log)
	go meterLoop(ctx, s.svc.Metering(), s.cfg.MeterInterval, s.log)
	go s.launch.replicas.listen(ctx)
	s.launch.loadNames(ctx, s.log)
	go s.svc.Runs.FlushLogs(ctx, 100*time.Millisecond)
	go s.svc.Runs.Supervise(ctx, s.store.Engine() != store.Postgres)
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

type statusWriter struct {
	http.ResponseWriter
	status int
	// expected: the handler said its error status is the service's state
	// (edge.MarkExpected), so it is logged at INFO.
	expected bool
}

func (w *statusWriter) MarkExpected() { w.expected = true }

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

// Unwrap lets http.ResponseController reach the connection: flushing a
// stream, moving its write deadline, hijacking for a WebSocket.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func logRequests(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if log.Enabled(r.Context(), slog.LevelDebug) || sw.status >= 500 && sw.status != http.StatusNotImplemented {
			level := levelFor(sw.status)
			if sw.expected && level > slog.LevelInfo {
				level = slog.LevelInfo
			}
			log.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path, "client", clientaddr.Of(r),
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

// route sends requests for the API host to the API and every other host to
// the edge, on both listeners. With ACME, HTTP-01 challenges are answered
// for every host first.
func (s *Server) route(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.launch.certs.acme != nil && strings.HasPrefix(r.URL.Path, acme.ChallengePrefix) {
			s.launch.certs.acme.ServeHTTP(w, r)
			return
		}
		if s.isAPIHost(r.Host) {
			// Over HTTPS the API and the human pages tell browsers to
			// come back only over HTTPS. Launched sites decide for
			// themselves.
			if r.TLS != nil {
				w.Header().Set("Strict-Transport-Security", "max-age=31536000")
			}
			api.ServeHTTP(w, r)
			return
		}
		// Sites answered over TLS (HTTP/1.1 or HTTP/2) announce HTTP/3.
		if r.TLS != nil && r.ProtoMajor < 3 && s.launch.h3 != nil {
			w.Header()["Alt-Svc"] = s.launch.h3.altSvc
		}
		s.launch.edge.ServeHTTP(w, r)
	})
}

func hostOf(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.ToLower(strings.Trim(h, "[]"))
}

// isAPIHost: the base URL's and MCP URL's hosts, IP literals and plain
// localhost are the API; names under the preview domain and launched
// domains are sites.
func (s *Server) isAPIHost(h string) bool {
	host := hostOf(h)
	if host == "" || host == "localhost" || net.ParseIP(host) != nil {
		return true
	}
	names := s.launch.apiHosts
	if names == nil {
		names = s.urlHosts()
	}
	for _, n := range names {
		if n == host {
			return true
		}
	}
	return false
}

func (s *Server) urlHosts() []string {
	var hosts []string
	for _, u := range []string{s.BaseURL(), s.cfg.APIURL} {
		if u == "" {
			continue
		}
		rest := u[strings.Index(u, "://")+3:]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[:i]
		}
		hosts = append(hosts, hostOf(rest))
	}
	return hosts
}

// listenLaunch binds the HTTPS and DNS listeners; the HTTPS port is what
// preview URLs name, so it is known before serving.
func (s *Server) listenLaunch(ctx context.Context) error {
	ln, h3, err := listenTLS(s.cfg.HTTPSAddr, s.cfg.HTTP3Addr)
	if err != nil {
		return err
	}
	s.launch.tlsLn, s.launch.h3 = s.trusted.Listen(ln, s.cfg.Listen.HeaderTimeout), h3
	s.launch.apiHosts = s.urlHosts()

	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	addr, err := s.launch.dns.Listen(dctx, s.cfg.DNSAddr)
	if err != nil {
		cancel()
		ln.Close()
		h3.close()
		return fmt.Errorf("listen dns %s: %w", s.cfg.DNSAddr, err)
	}
	s.launch.dnsAddr, s.launch.dnsStop = addr, cancel

	sln, err := net.Listen("tcp", s.cfg.SMTPAddr)
	if err != nil {
		cancel()
		ln.Close()
		h3.close()
		return fmt.Errorf("listen smtp %s: %w", s.cfg.SMTPAddr, err)
	}
	s.launch.smtpLn = sln
	spool := filepath.Join(s.cfg.DataDir, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		cancel()
		ln.Close()
		h3.close()
		sln.Close()
		return fmt.Errorf("mail spool: %w", err)
	}
	s.launch.smtp = smtpd.New(smtpd.Config{
		Mail:            s.svc.Mail,
		TLS:             &tls.Config{GetCertificate: s.launch.certs.forMail, MinVersion: tls.VersionTLS12},
		Hostname:        hostOf(s.BaseURL()),
		MaxMessageBytes: s.cfg.SMTPMaxMessageBytes,
		PeerRate:        s.cfg.SMTPPeerRate,
		Sessions:        s.cfg.SMTPSessions.Total,
		NetworkSessions: s.cfg.SMTPSessions.PerNetwork,
		SpoolDir:        spool,
		TenantNetworks:  []netip.Prefix{s.cfg.SandboxNetwork},
		Resolver:        newMailResolver(addr),
		Log:             s.log,
	})
	return nil
}

// SMTPAddr is the bound SMTP address.
func (s *Server) SMTPAddr() string { return s.launch.smtpLn.Addr().String() }

// HTTPSAddr is the bound TLS address.
func (s *Server) HTTPSAddr() string { return s.launch.tlsLn.Addr().String() }

// DNSAddr is the bound DNS address (UDP and TCP).
func (s *Server) DNSAddr() string { return s.launch.dnsAddr }

func (s *Server) serveLaunch(ctx context.Context, handler http.Handler) error {
	lim := s.cfg.Listen
	s.launch.https = &http.Server{
		Handler:           handler,
		TLSConfig:         &tls.Config{GetCertificate: s.launch.certs.forHandshake, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: lim.HeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		// Failed handshakes (a name with no site, an untrusting client)
		// are the client's business.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	serve := func() error { return s.launch.https.ServeTLS(s.launch.tlsLn, "", "") }
	if !s.cfg.DisableEdgeFastPath {
		// The fast path completes handshakes itself and hands net/http
		// the connections it does not serve (h2 ones at once).
		tc := s.launch.https.TLSConfig
		tc.NextProtos = []string{"h2", "http/1.1"}
		s.launch.https.ConnContext = fastpath.ConnContext
		s.launch.https.Handler = fastpath.WithTLS(handler)
		ln := s.edgeListener(s.launch.tlsLn, tc, handler)
		serve = func() error { return s.launch.https.Serve(ln) }
	}
	go func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("https listener stopped", "err", err)
		}
	}()
	var h3fast *fastpath.Config
	if !s.cfg.DisableEdgeFastPath {
		h3fast = &fastpath.Config{Edge: s.launch.edge, API: s.isAPIHost, Log: s.log,
			HeaderTimeout: lim.HeaderTimeout, IdleTimeout: lim.IdleTimeout, WriteTimeout: lim.WriteTimeout}
		if s.launch.certs.acme != nil {
			h3fast.Reserved = func(p string) bool { return strings.HasPrefix(p, acme.ChallengePrefix) }
		}
	}
	s.launch.h3.serve(handler, s.launch.certs.forHandshake, lim, s.log, h3fast)
	go func() {
		if err := s.launch.smtp.Serve(s.launch.smtpLn); err != nil {
			s.log.Error("smtp listener stopped", "err", err)
		}
	}()
	// The runner lives until stopLaunch; the serve context only signals.
	err := s.launch.runner.Start(context.WithoutCancel(ctx))
	if err == nil || s.store.Engine() != store.Postgres {
		return err
	}
	// PostgreSQL went away as the replica started (a restart, a
	// failover): serve, and start the runner once it is back.
	s.log.Warn("task runner not started yet; retrying", "err", err)
	go func() {
		for wait := 250 * time.Millisecond; ; wait = min(wait*2, 10*time.Second) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			if err := s.launch.runner.Start(context.WithoutCancel(ctx)); err == nil {
				s.log.Info("task runner started")
				return
			} else {
				s.log.Warn("task runner not started yet; retrying", "err", err, "after", wait)
			}
		}
	}()
	return nil
}

// edgeListener puts the edge's fast path in front of ln unless it is
// disabled; tc makes it a TLS listener, and h, net/http's handler, lets it
// serve h2 connections for static sites too.
func (s *Server) edgeListener(ln net.Listener, tc *tls.Config, h http.Handler) net.Listener {
	if s.cfg.DisableEdgeFastPath {
		return ln
	}
	lim := s.cfg.Listen
	cfg := fastpath.Config{Edge: s.launch.edge, API: s.isAPIHost, TLS: tc, Log: s.log,
		HeaderTimeout: lim.HeaderTimeout, IdleTimeout: lim.IdleTimeout, WriteTimeout: lim.WriteTimeout, ReadTimeout: lim.ReadTimeout,
		Handler: h, MaxHeaderBytes: lim.MaxHeaderBytes, Trusted: s.trusted}
	if tc != nil {
		cfg.TLSHeader = s.launch.h3.headerLine()
	}
	if s.launch.certs.acme != nil {
		cfg.Reserved = func(p string) bool { return strings.HasPrefix(p, acme.ChallengePrefix) }
	}
	if s.api != nil {
		cfg.APIRead = s.apiRead
	}
	return fastpath.New(ln, cfg)
}

// apiRead answers on the fast path what the API answers from its kept
// answers, with the headers route adds; logRequests has nothing to log
// of a 200 below debug level, which the fast path logs itself.
func (s *Server) apiRead(dst []byte, q *fastpath.APIRequest) (head, body []byte, ok bool) {
	if q.Method == http.MethodPost && string(q.Path) == "/mcp" {
		// The MCP endpoint's reads: a tool call of a read-only tool
		// (keyed or not), initialize, ping, tools/list.
		if s.mcp == nil || q.Query != nil {
			return dst, nil, false
		}
		fr := mcp.FastRequest{Accept: q.Accept, ContentType: q.ContentType,
			Authorization: q.AuthorizationValue, ProtocolVersion: q.MCPProtocolVersion, Origin: q.Origin, Body: q.Body,
			RemoteAddr: q.RemoteAddr, Host: q.Host, ClientIP: q.ClientIP, Scratch: q.Scratch}
		head, body, ok = s.mcp.AnswerFast(dst, &fr)
		q.Scratch = fr.Scratch
	} else if q.Method == http.MethodPost && string(q.Path) == "/v1/quotes" && s.quotes != nil {
		// create_quote, a write: answered here when the chain would run
		// it, else by net/http.
		fq := httpapi.QuoteRequest{KeptRequest: httpapi.KeptRequest{Method: q.Method, Path: q.Path, Query: q.Query,
			Accept: q.Accept, ContentType: q.ContentType, Authorization: q.AuthorizationValue, Body: q.Body, ClientIP: q.ClientIP},
			IdempotencyKey: q.IdempotencyKey, Scratch: q.Scratch}
		head, body, ok = s.quotes.Answer(dst, &fq)
		q.Scratch = fq.Scratch
	} else {
		head, body, ok = s.api.AnswerKept(dst, &httpapi.KeptRequest{Method: q.Method, Path: q.Path, Query: q.Query,
			Accept: q.Accept, ContentType: q.ContentType, Authorization: q.AuthorizationValue, Body: q.Body, ClientIP: q.ClientIP, Refusals: true})
	}
	if !ok {
		return head, body, false
	}
	s.apiFast.Add(1)
	if q.TLS {
		// After the API's headers: net/http writes them sorted.
		head = append(head, "Strict-Transport-Security: max-age=31536000\r\n"...)
	}
	return head, body, true
}

func (s *Server) stopLaunch(ctx context.Context) error {
	var errs []error
	if s.launch.https != nil {
		errs = append(errs, s.launch.https.Shutdown(ctx))
	}
	errs = append(errs, s.launch.h3.stop(ctx))
	if s.launch.smtp != nil {
		// Sessions get a few seconds to finish; a sender whose session is
		// cut retries, as SMTP senders do.
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := s.launch.smtp.Shutdown(sctx); err != nil {
			s.launch.smtp.Close()
		}
		cancel()
	}
	errs = append(errs, s.launch.runner.Stop(ctx))
	// Running services stop with the server (SIGTERM, then SIGKILL after
	// their grace) and start again when it starts.
	s.sup.Shutdown(ctx)
	s.svc.Runs.FlushNow(context.WithoutCancel(ctx))
	if s.launch.dnsStop != nil {
		s.launch.dnsStop()
	}
	return errors.Join(errs...)
}
