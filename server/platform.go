package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/pierhq/pier/server/internal/acme"
	"github.com/pierhq/pier/server/internal/cache"
	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/smtpd"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/tasks"
	"github.com/pierhq/pier/server/internal/tlsca"
)

// launchParts are the providers a launch drives and the listeners they
// serve on: the edge over HTTP and HTTPS, the local CA, DNS and the task
// runner.
type launchParts struct {
	smtp    *smtpd.Server
	smtpLn  net.Listener
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
	if s.store.Engine() == store.Postgres {
		if ca, err = s.sharedCA(ca); err != nil {
			return nil, err
		}
	}
	lp := &launchParts{ca: ca, edge: edge.NewWithLimits(edge.FromStore(s.store), s.log, s.cfg.Edge), dns: dnsserver.NewWithLimits(s.store.Domains(), s.log, s.cfg.DNS, s.cfg.DNSSecondaries)}
	caaIssuers := []string{tlsca.Name}
	if s.cfg.ACMEDirectory != "" {
		var shared acme.Shared
		if s.store.Engine() == store.Postgres {
			// Replicas behind one balancer: the ACME server's challenge
			// request may reach any of them, and all serve what one got.
			shared = s.store.Shared()
		}
		lp.acme, err = acme.New(acme.Config{Directory: s.cfg.ACMEDirectory, Email: s.cfg.ACMEEmail, CAFile: s.cfg.ACMECAFile,
			Dir: filepath.Join(s.cfg.DataDir, "acme"), Now: s.cfg.Now, Log: s.log, Shared: shared})
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

// sharedCA makes every replica on one PostgreSQL sign with one local CA:
// the first to start offers its root, and every replica adopts what the
// database holds (writing it into its data directory for pier ca), so a
// certificate from any replica verifies against the same root.
func (s *Server) sharedCA(local *tlsca.CA) (*tlsca.CA, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	certPEM, keyPEM, err := local.Files()
	if err != nil {
		return nil, err
	}
	offer, _ := json.Marshal(map[string]string{"cert": string(certPEM), "key": string(keyPEM)})
	keys := s.store.SandboxReleases()
	if err := keys.PutKeyIfAbsent(ctx, "local-ca", string(offer), s.cfg.Now()); err != nil {
		return nil, err
	}
	raw, err := keys.Key(ctx, "local-ca")
	if err != nil {
		return nil, err
	}
	var held struct{ Cert, Key string }
	if err := json.Unmarshal([]byte(raw), &held); err != nil {
		return nil, err
	}
	if held.Cert == string(certPEM) {
		return local, nil
	}
	ca, err := tlsca.FromPEM([]byte(held.Cert), []byte(held.Key), s.cfg.Now)
	if err != nil {
		return nil, err
	}
	return ca, ca.Save(CADir(s.cfg.DataDir))
}

// platform is what the domain's launches drive, as this server provides
// it: the task runner, the edge's and DNS's caches, certificates and the
// bound ports.
type platform struct{ s *Server }

func (p platform) Enqueue(ctx context.Context, taskID string) error {
	return p.s.launch.runner.Enqueue(ctx, taskID)
}

func (p platform) InvalidateHosts(hosts ...string) {
	p.s.launch.edge.Invalidate(hosts...)
	p.s.announce(invalidation{Hosts: hosts})
}

func (p platform) InvalidateZone(domain string) {
	p.s.launch.dns.Invalidate(domain)
	p.s.announce(invalidation{Zone: domain})
}

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

// VerifyDNS asks this server's DNS listener, over UDP as a resolver would,
// for name's records of rrtype, and succeeds once one of them contains
// want.
func (p platform) VerifyDNS(ctx context.Context, name, rrtype, want string) error {
	t, ok := dns.StringToType[rrtype]
	if !ok {
		return fmt.Errorf("unknown record type %s", rrtype)
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), t)
	m.SetEdns0(4096, false)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	in, _, err := c.ExchangeContext(ctx, m, p.s.launch.dnsAddr)
	if err != nil {
		return err
	}
	for _, rr := range in.Answer {
		var got string
		switch r := rr.(type) {
		case *dns.MX:
			got = r.Mx
		case *dns.TXT:
			got = strings.Join(r.Txt, "")
		default:
			got = rr.String()
		}
		if strings.Contains(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no %s record of %s holds %q (rcode %s, %d answers)", rrtype, name, want, dns.RcodeToString[in.Rcode], len(in.Answer))
}

// mailResolver answers DKIM, SPF and DMARC's questions from this server's
// own DNS first (the domains it hosts) and the system's resolver for the
// rest, keeping answers (and failures) for a minute in a bounded cache, as
// a mail server's caching resolver would.
type mailResolver struct {
	own, system *net.Resolver
	cache       *cache.Cache[string, resolved]
}

type resolved struct {
	txt   []string
	mx    []*net.MX
	ips   []net.IPAddr
	err   error
	until time.Time
}

func newMailResolver(dnsAddr string) *mailResolver {
	d := net.Dialer{Timeout: 2 * time.Second}
	own := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, dnsAddr)
	}}
	return &mailResolver{own: own, system: net.DefaultResolver, cache: cache.New[string, resolved](8192, 0, nil)}
}

// ask answers from the cache, or asks our DNS and then the system's.
func (r *mailResolver) ask(ctx context.Context, key string, lookup func(*net.Resolver) (resolved, error)) resolved {
	if v, ok := r.cache.Get(key); ok && time.Now().Before(v.until) {
		return v
	}
	v, err := lookup(r.own)
	if err != nil {
		v, err = lookup(r.system)
	}
	v.err, v.until = err, time.Now().Add(time.Minute)
	r.cache.Put(key, v)
	return v
}

func (r *mailResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	v := r.ask(ctx, "TXT "+name, func(res *net.Resolver) (resolved, error) {
		t, err := res.LookupTXT(ctx, name)
		return resolved{txt: t}, err
	})
	return v.txt, v.err
}

func (r *mailResolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	v := r.ask(ctx, "MX "+name, func(res *net.Resolver) (resolved, error) {
		m, err := res.LookupMX(ctx, name)
		return resolved{mx: m}, err
	})
	return v.mx, v.err
}

func (r *mailResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	v := r.ask(ctx, "IP "+host, func(res *net.Resolver) (resolved, error) {
		a, err := res.LookupIPAddr(ctx, host)
		return resolved{ips: a}, err
	})
	return v.ips, v.err
}

func (r *mailResolver) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	return r.system.LookupAddr(ctx, addr)
}

// mailCertificate serves STARTTLS: the mail host of a domain whose mail is
// set up gets its certificate (the local CA's, or ACME's); anything else
// (no SNI, an IP) gets the server's own name's.
func (s *Server) mailCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(hello.ServerName)
	if domain, ok := strings.CutPrefix(name, "mail."); ok {
		if d, err := s.store.Mail().Domain(hello.Context(), domain); err == nil && d.State == "ready" {
			return s.launch.certificate(name)
		}
	}
	return s.launch.certificate(hostOf(s.BaseURL()))
}
