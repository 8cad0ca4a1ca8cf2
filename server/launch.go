package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/pierhq/pier/server/internal/acme"
	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/edge/fastpath"
	"github.com/pierhq/pier/server/internal/tasks"
	"github.com/pierhq/pier/server/internal/tlsca"
)

// launchParts are the providers a launch drives and the listeners they
// serve on: the edge over HTTP and HTTPS, the local CA, DNS and the task
// runner.
type launchParts struct {
	ca      *tlsca.CA
	acme    *acme.Issuer // nil unless certificates come from ACME
	edge    *edge.Edge
	dns     *dnsserver.Server
	runner  *tasks.Runner
	tlsLn   net.Listener
	https   *http.Server
	dnsAddr string
	dnsStop context.CancelFunc
	// apiHosts are the hosts of the base and MCP URLs, worked out once the
	// HTTP listener is bound rather than on every request.
	apiHosts []string
}

// CADir is where the local CA lives in a data directory.
func CADir(dataDir string) string { return filepath.Join(dataDir, "ca") }

// buildLaunch builds the parts launches drive: the local CA (and ACME
// when configured), the edge and DNS. It returns the CAA issuers zones name.
func (s *Server) buildLaunch() ([]string, error) {
	ca, err := tlsca.LoadOrCreate(CADir(s.cfg.DataDir), s.cfg.Now)
	if err != nil {
		return nil, err
	}
	lp := &launchParts{ca: ca, edge: edge.NewWithLimits(s.store, s.log, s.cfg.Edge), dns: dnsserver.NewWithLimits(s.store, s.log, s.cfg.DNS, s.cfg.DNSSecondaries)}
	caaIssuers := []string{tlsca.Name}
	if s.cfg.ACMEDirectory != "" {
		lp.acme, err = acme.New(acme.Config{Directory: s.cfg.ACMEDirectory, Email: s.cfg.ACMEEmail, CAFile: s.cfg.ACMECAFile,
			Dir: filepath.Join(s.cfg.DataDir, "acme"), Now: s.cfg.Now, Log: s.log})
		if err != nil {
			return nil, err
		}
		// Which CA identity an ACME server checks CAA for is its own
		// business; zones name none rather than a wrong one.
		caaIssuers = nil
	}
	s.launch = lp
	return caaIssuers, nil
}

// platform is what the domain's launches drive, as this server provides
// it: the task runner, the edge's and DNS's caches, certificates and the
// bound ports.
type platform struct{ s *Server }

func (p platform) Enqueue(ctx context.Context, taskID string) error {
	return p.s.launch.runner.Enqueue(ctx, taskID)
}
func (p platform) InvalidateHosts(hosts ...string) { p.s.launch.edge.Invalidate(hosts...) }
func (p platform) InvalidateZone(domain string)    { p.s.launch.dns.Invalidate(domain) }
func (p platform) Certificate(host string) error {
	_, err := p.s.launch.certificate(host)
	return err
}
func (p platform) VerifyHTTPS(ctx context.Context, host string) error {
	return p.s.verifyHTTPS(ctx, host)
}

// Ports are the bound listeners' ports once they are bound, and the
// configured ones before.
func (p platform) Ports() (http, https string) {
	_, http, _ = net.SplitHostPort(p.s.cfg.HTTPAddr)
	_, https, _ = net.SplitHostPort(p.s.cfg.HTTPSAddr)
	if p.s.ln != nil {
		_, http, _ = net.SplitHostPort(p.s.Addr())
	}
	if ln := p.s.launch.tlsLn; ln != nil {
		_, https, _ = net.SplitHostPort(ln.Addr().String())
	}
	return http, https
}

// certificate comes from ACME when configured, except for the names no
// ACME server issues for (IP literals and plain localhost, the API's
// defaults), which keep the local CA's.
func (lp *launchParts) certificate(host string) (*tls.Certificate, error) {
	if h := hostOf(host); lp.acme != nil && h != "localhost" && net.ParseIP(h) == nil {
		return lp.acme.Certificate(h)
	}
	return lp.ca.Certificate(host)
}

// route sends requests for the API host to the API and every other host to
// the edge, on both listeners. With ACME, HTTP-01 challenges are answered
// for every host first.
func (s *Server) route(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.launch.acme != nil && strings.HasPrefix(r.URL.Path, acme.ChallengePrefix) {
			s.launch.acme.ServeHTTP(w, r)
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
	ln, err := net.Listen("tcp", s.cfg.HTTPSAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.HTTPSAddr, err)
	}
	s.launch.tlsLn = ln
	s.launch.apiHosts = s.urlHosts()

	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	addr, err := s.launch.dns.Listen(dctx, s.cfg.DNSAddr)
	if err != nil {
		cancel()
		ln.Close()
		return fmt.Errorf("listen dns %s: %w", s.cfg.DNSAddr, err)
	}
	s.launch.dnsAddr, s.launch.dnsStop = addr, cancel
	return nil
}

// HTTPSAddr is the bound TLS address.
func (s *Server) HTTPSAddr() string { return s.launch.tlsLn.Addr().String() }

// DNSAddr is the bound DNS address (UDP and TCP).
func (s *Server) DNSAddr() string { return s.launch.dnsAddr }

// CARootPEM is the local CA's root certificate.
func (s *Server) CARootPEM() []byte { return s.launch.ca.RootPEM() }

// getCertificate issues certificates only for names this server answers
// for: the API host and hosts with a live site. An unknown SNI gets none,
// so a client cannot make the CA sign arbitrary names.
func (s *Server) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(hello.ServerName)
	if name == "" {
		name = "localhost"
	}
	if s.isAPIHost(name) || s.launch.edge.Has(hello.Context(), name) {
		return s.launch.certificate(name)
	}
	// A preview host with no site (torn down, or never launched) still
	// gets a valid certificate, the local CA's wildcard for the preview
	// zone, so that a browser sees Pier's 404 page rather than a TLS
	// alert. One certificate covers every such name, so an unknown SNI
	// costs nothing that lasts. With ACME, which issues per name over
	// HTTP-01, unknown names get none.
	if label, ok := strings.CutSuffix(name, "."+s.cfg.PreviewDomain); ok && s.launch.acme == nil &&
		label != "" && !strings.Contains(label, ".") && edge.ValidHost(name) {
		return s.launch.ca.Certificate("*." + s.cfg.PreviewDomain)
	}
	return nil, fmt.Errorf("no site at %q", name)
}

func (s *Server) serveLaunch(ctx context.Context, handler http.Handler) error {
	lim := s.cfg.Listen
	s.launch.https = &http.Server{
		Handler:           handler,
		TLSConfig:         &tls.Config{GetCertificate: s.getCertificate, MinVersion: tls.VersionTLS12},
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
		ln := s.edgeListener(s.launch.tlsLn, tc)
		serve = func() error { return s.launch.https.Serve(ln) }
	}
	go func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("https listener stopped", "err", err)
		}
	}()
	// The runner lives until stopLaunch; the serve context only signals.
	return s.launch.runner.Start(context.WithoutCancel(ctx))
}

// edgeListener puts the edge's fast path in front of ln unless it is
// disabled; tc makes it a TLS listener.
func (s *Server) edgeListener(ln net.Listener, tc *tls.Config) net.Listener {
	if s.cfg.DisableEdgeFastPath {
		return ln
	}
	lim := s.cfg.Listen
	cfg := fastpath.Config{Edge: s.launch.edge, API: s.isAPIHost, TLS: tc, Log: s.log,
		HeaderTimeout: lim.HeaderTimeout, IdleTimeout: lim.IdleTimeout, WriteTimeout: lim.WriteTimeout}
	if s.launch.acme != nil {
		cfg.Reserved = func(p string) bool { return strings.HasPrefix(p, acme.ChallengePrefix) }
	}
	return fastpath.New(ln, cfg)
}

func (s *Server) stopLaunch(ctx context.Context) error {
	var errs []error
	if s.launch.https != nil {
		errs = append(errs, s.launch.https.Shutdown(ctx))
	}
	errs = append(errs, s.launch.runner.Stop(ctx))
	if s.launch.dnsStop != nil {
		s.launch.dnsStop()
	}
	return errors.Join(errs...)
}

// verifyHTTPS fetches https://host/ from this server's own TLS listener with
// the chain verified against the local CA: a site is HTTPS-ready only once
// it is really served. With ACME, whose roots this server need not trust
// itself, the served leaf must be the one obtained for host.
func (s *Server) verifyHTTPS(ctx context.Context, host string) error {
	addr := s.launch.tlsLn.Addr().String()
	tc := &tls.Config{RootCAs: s.launch.ca.Pool(), ServerName: host}
	if s.launch.acme != nil {
		want, err := s.launch.certificate(host)
		if err != nil {
			return err
		}
		tc.InsecureSkipVerify = true // replaced by the check below
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, want.Certificate[0]) {
				return fmt.Errorf("%s serves another certificate than the one obtained for it", host)
			}
			return cs.PeerCertificates[0].VerifyHostname(host)
		}
	}
	tr := &http.Transport{
		TLSClientConfig: tc,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode >= 500 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if resp.StatusCode == http.StatusNotFound && resp.Header.Get("ETag") == "" {
		// The edge's "no site here" answer: not deployed on this replica yet.
		if !s.launch.edge.Has(ctx, host) {
			return fmt.Errorf("no site served at %s yet", host)
		}
	}
	return nil
}
