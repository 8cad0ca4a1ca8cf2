package server

import (
	"context"
	"fmt"
	"log/slog"
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
	"github.com/pierhq/pier/server/internal/nameindex"
	"github.com/pierhq/pier/server/internal/smtpd"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/tasks"
	"github.com/pierhq/pier/server/internal/tlsca"
)

// launchParts are the providers a launch drives and the listeners they
// serve on: the edge over HTTP and HTTPS, the certificates, DNS, the other
// replicas' caches and the task runner.
type launchParts struct {
	smtp     *smtpd.Server
	smtpLn   net.Listener
	certs    *certificates
	edge     *edge.Edge
	dns      *dnsserver.Server
	replicas *invalidations
	// hosts and zones are the in-memory name indexes the edge and DNS
	// answer unknown names from (package nameindex).
	hosts, zones *nameindex.Index
	runner       *tasks.Runner
	tlsLn        net.Listener
	https        *http.Server
	// h3 is the HTTP/3 listener, nil when it is turned off.
	h3      *h3Listener
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
		if ca, err = sharedCA(s.store, s.cfg.DataDir, s.cfg.Now, ca); err != nil {
			return nil, err
		}
	}
	lp := &launchParts{edge: edge.NewWithLimits(edge.FromStore(s.store), s.log, s.cfg.Edge), dns: dnsserver.NewWithLimits(s.store.Domains(), s.log, s.cfg.DNS, s.cfg.DNSSecondaries)}
	lp.certs = &certificates{ca: ca, edge: lp.edge, store: s.store, previewDomain: s.cfg.PreviewDomain, isAPIHost: s.isAPIHost,
		ownHost: func() string { return hostOf(s.BaseURL()) }}
	lp.hosts, lp.zones = nameIndexes(s.store, s.log)
	lp.edge.UseNames(lp.hosts)
	lp.dns.UseNames(lp.zones)
	lp.replicas = &invalidations{store: s.store, databaseURL: s.cfg.DatabaseURL, log: s.log, edge: lp.edge, dns: lp.dns}
	caaIssuers := []string{tlsca.Name}
	if s.cfg.ACMEDirectory != "" {
		var shared acme.Shared
		if s.store.Engine() == store.Postgres {
			// Replicas behind one balancer: the ACME server's challenge
			// request may reach any of them, and all serve what one got.
			shared = s.store.Shared()
		}
		lp.certs.acme, err = acme.New(acme.Config{Directory: s.cfg.ACMEDirectory, Email: s.cfg.ACMEEmail, CAFile: s.cfg.ACMECAFile,
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

// nameIndexes are the indexes of every live host and every zone apex,
// read from the store.
func nameIndexes(st *store.Store, log *slog.Logger) (hosts, zones *nameindex.Index) {
	hosts = nameindex.New("hosts", func(ctx context.Context, since int64) ([]nameindex.Name, error) {
		return st.Services().HostsSince(ctx, since)
	}, log)
	zones = nameindex.New("zones", func(ctx context.Context, since int64) ([]nameindex.Name, error) {
		return st.Domains().ZonesSince(ctx, since)
	}, log)
	return hosts, zones
}

// loadNames reads both indexes before the edge and DNS serve, and keeps
// them current until ctx ends. An index that cannot be read stays open
// (every name looked up in the store) until a later read succeeds.
func (lp *launchParts) loadNames(ctx context.Context, log *slog.Logger) {
	for _, x := range []*nameindex.Index{lp.hosts, lp.zones} {
		if err := x.Load(ctx); err != nil {
			log.Warn("name index: first load; names are looked up in the store until it loads", "err", err)
		}
		go x.Run(ctx, 0, 0)
	}
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
	p.s.launch.replicas.announce(invalidation{Hosts: hosts})
}

func (p platform) InvalidateZone(domain string) {
	p.s.launch.dns.Invalidate(domain)
	p.s.launch.replicas.announce(invalidation{Zone: domain})
}

func (p platform) Certificate(host string) error {
	_, err := p.s.launch.certs.certificate(host)
	return err
}

func (p platform) VerifyHTTPS(ctx context.Context, host string) error {
	return p.s.launch.certs.verifyHTTPS(ctx, p.s.launch.tlsLn.Addr().String(), host)
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

// CARootPEM is the local CA's root certificate.
func (s *Server) CARootPEM() []byte { return s.launch.certs.ca.RootPEM() }

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
