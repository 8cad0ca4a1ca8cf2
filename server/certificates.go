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
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/acme"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/tlsca"
)

// certificates are this server's TLS certificates: the local CA's, or
// ACME's when configured, for the names it answers for. The HTTPS and
// SMTP listeners take theirs here, and a launch's TLS step checks a site
// is really served with one.
type certificates struct {
	ca   *tlsca.CA
	acme *acme.Issuer // nil unless certificates come from ACME
	// edge tells which hosts have a live site; store which mail domains
	// are set up.
	edge  *edge.Edge
	store *store.Store
	// previewDomain is the zone preview hosts live under; isAPIHost tells
	// the API's own hosts, and ownHost is the base URL's host.
	previewDomain string
	isAPIHost     func(host string) bool
	ownHost       func() string
}

// certificate comes from ACME when configured, except for the names no
// ACME server issues for (IP literals and plain localhost, the API's
// defaults), which keep the local CA's.
func (c *certificates) certificate(host string) (*tls.Certificate, error) {
	if h := hostOf(host); c.acme != nil && h != "localhost" && net.ParseIP(h) == nil {
		return c.acme.Certificate(h)
	}
	return c.ca.Certificate(host)
}

// forHandshake issues certificates only for names this server answers
// for: the API host and hosts with a live site. An unknown SNI gets none,
// so a client cannot make the CA sign arbitrary names.
func (c *certificates) forHandshake(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(hello.ServerName)
	if name == "" {
		name = "localhost"
	}
	if c.isAPIHost(name) || c.edge.Has(hello.Context(), name) {
		return c.certificate(name)
	}
	// A preview host with no site (torn down, or never launched) still
	// gets a valid certificate, so that a browser sees Pier's 404 page
	// rather than a TLS alert. One a service had gets its own name's:
	// curl and browsers refuse a wildcard directly under a top-level name
	// such as *.localhost, and a torn-down preview URL is one people
	// still open. Any other gets the local CA's wildcard for the preview
	// zone, one certificate for every such name, so an unknown SNI costs
	// nothing that lasts. With ACME, which issues per name over HTTP-01,
	// unknown names get none.
	if label, ok := strings.CutSuffix(name, "."+c.previewDomain); ok && c.acme == nil &&
		label != "" && !strings.Contains(label, ".") && edge.ValidHost(name) {
		if c.store != nil {
			if used, err := c.store.Services().PreviewHostUsed(hello.Context(), name); err == nil && used {
				return c.ca.Certificate(name)
			}
		}
		return c.ca.Certificate("*." + c.previewDomain)
	}
	return nil, fmt.Errorf("no site at %q", name)
}

// verifyHTTPS fetches https://host/ from this server's own TLS listener
// at addr with the chain verified against the local CA: a site is
// HTTPS-ready only once it is really served. With ACME, whose roots this server need not trust
// itself, the served leaf must be the one obtained for host.
func (c *certificates) verifyHTTPS(ctx context.Context, addr, host string) error {
	tc := &tls.Config{RootCAs: c.ca.Pool(), ServerName: host}
	if c.acme != nil {
		want, err := c.certificate(host)
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
		if !c.edge.Has(ctx, host) {
			return fmt.Errorf("no site served at %s yet", host)
		}
	}
	return nil
}

// forMail serves STARTTLS: the mail host of a domain whose mail is
// set up gets its certificate (the local CA's, or ACME's); anything else
// (no SNI, an IP) gets the server's own name's.
func (c *certificates) forMail(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(hello.ServerName)
	if domain, ok := strings.CutPrefix(name, "mail."); ok {
		if d, err := c.store.Mail().Domain(hello.Context(), domain); err == nil && d.State == "ready" {
			return c.certificate(name)
		}
	}
	return c.certificate(c.ownHost())
}

// sharedCA makes every replica on one PostgreSQL sign with one local CA:
// the first to start offers its root, and every replica adopts what the
// database holds (writing it into its data directory for pier ca), so a
// certificate from any replica verifies against the same root.
func sharedCA(st *store.Store, dataDir string, now func() time.Time, local *tlsca.CA) (*tlsca.CA, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	certPEM, keyPEM, err := local.Files()
	if err != nil {
		return nil, err
	}
	offer, _ := json.Marshal(map[string]string{"cert": string(certPEM), "key": string(keyPEM)})
	keys := st.SandboxReleases()
	if err := keys.PutKeyIfAbsent(ctx, "local-ca", string(offer), now()); err != nil {
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
	ca, err := tlsca.FromPEM([]byte(held.Cert), []byte(held.Key), now)
	if err != nil {
		return nil, err
	}
	return ca, ca.Save(CADir(dataDir))
}
