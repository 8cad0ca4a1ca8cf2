package acme

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-acme/lego/v4/certcrypto"
	"github.com/go-acme/lego/v4/certificate"
	"github.com/go-acme/lego/v4/lego"
	legolog "github.com/go-acme/lego/v4/log"
	"github.com/go-acme/lego/v4/registration"
)

// ChallengePrefix is the path under which HTTP-01 challenges are answered.
const ChallengePrefix = "/.well-known/acme-challenge/"

// RenewBefore is how long before expiry a certificate is renewed.
const RenewBefore = 30 * 24 * time.Hour

// retryAfterFailure keeps a failed issuance from being retried on every TLS
// handshake: ACME servers limit failed orders per name.
const retryAfterFailure = time.Minute

// Config configures an Issuer.
type Config struct {
	// Directory is the ACME directory URL.
	Directory string
	// Email is the account's contact; it may be empty.
	Email string
	// CAFile is a PEM bundle trusted for the ACME server's own TLS, for a
	// server whose certificate is not under the system roots (Pebble).
	CAFile string
	// Dir keeps the account key and the certificates.
	Dir string
	// Shared, when set, is where replicas behind one load balancer keep
	// challenges in progress and obtained certificates, so that the
	// replica the ACME server reaches can answer a challenge another
	// presented, and every replica serves what one obtained.
	Shared Shared
	Now    func() time.Time
	Log    *slog.Logger
}

// Issuer obtains, caches and renews certificates.
type Issuer struct {
	cfg  Config
	dir  string
	http *http.Client

	mu    sync.Mutex
	certs map[string]*entry

	clientMu sync.Mutex
	client   *lego.Client // created on first issuance

	chMu       sync.RWMutex
	challenges map[string]challenge // by token
}

type entry struct {
	mu       sync.Mutex // held while obtaining for this host
	cert     *tls.Certificate
	renewing bool
	failedAt time.Time
	err      error
}

type challenge struct{ domain, keyAuth string }

// Shared is a key-value store the replicas share.
type Shared interface {
	Put(ctx context.Context, key, value string) error
	Get(ctx context.Context, key string) (string, error)
	Delete(ctx context.Context, key string) error
}

func (i *Issuer) shared() Shared { return i.cfg.Shared }

func (i *Issuer) sharedCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

var setLegoLog sync.Once

// New opens the issuer's directory. It does not contact the ACME server;
// that happens on the first certificate it must obtain, so a server starts
// even while its ACME server is unreachable.
func New(cfg Config) (*Issuer, error) {
	if cfg.Directory == "" {
		return nil, errors.New("acme: no directory URL")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	// One directory per ACME server, so switching servers never reuses an
	// account or a certificate from another.
	sum := sha256.Sum256([]byte(cfg.Directory))
	dir := filepath.Join(cfg.Dir, hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("acme: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("acme: %s holds no PEM certificate", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	setLegoLog.Do(func() {
		// lego logs through a package-level standard logger; send it to
		// the server's log at debug level instead of bare stderr.
		legolog.Logger = slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug)
	})
	return &Issuer{
		cfg:        cfg,
		dir:        dir,
		http:       &http.Client{Transport: tr, Timeout: time.Minute},
		certs:      map[string]*entry{},
		challenges: map[string]challenge{},
	}, nil
}

// Certificate returns the certificate for host: from memory, else from the
// directory, else obtained from the ACME server. One within RenewBefore of
// expiring is still served while a renewal runs in the background.
func (i *Issuer) Certificate(host string) (*tls.Certificate, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !validName(host) {
		return nil, fmt.Errorf("acme: %q is not a DNS name", host)
	}
	i.mu.Lock()
	e, ok := i.certs[host]
	if !ok {
		e = &entry{}
		i.certs[host] = e
	}
	i.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	now := i.cfg.Now()
	if e.cert == nil {
		e.cert = i.load(host)
	}
	if e.cert != nil && now.Before(e.cert.Leaf.NotAfter) {
		if now.After(e.cert.Leaf.NotAfter.Add(-RenewBefore)) && !e.renewing && now.Sub(e.failedAt) > retryAfterFailure {
			e.renewing = true
			go i.renew(host, e)
		}
		return e.cert, nil
	}
	if e.err != nil && now.Sub(e.failedAt) < retryAfterFailure {
		return nil, e.err
	}
	cert, err := i.obtain(host)
	if err != nil {
		e.err, e.failedAt = err, now
		return nil, err
	}
	e.cert, e.err = cert, nil
	return cert, nil
}

func (i *Issuer) renew(host string, e *entry) {
	cert, err := i.obtain(host)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.renewing = false
	if err != nil {
		e.failedAt = i.cfg.Now()
		i.cfg.Log.Warn("acme: renewing certificate", "host", host, "err", err)
		return
	}
	e.cert = cert
	i.cfg.Log.Info("acme: renewed certificate", "host", host, "not_after", cert.Leaf.NotAfter)
}

// validName admits lower-case DNS names only, which also keeps the cache's
// file names inside its directory.
func validName(h string) bool {
	if h == "" || len(h) > 253 || strings.HasPrefix(h, ".") || strings.Contains(h, "..") {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// certKey names a shared certificate: per ACME server, per host.
func (i *Issuer) certKey(host string) string {
	return "acme-cert:" + filepath.Base(i.dir) + ":" + host
}

func (i *Issuer) certPaths(host string) (chain, key string) {
	base := filepath.Join(i.dir, "certs", host)
	return base + ".crt", base + ".key"
}

// load reads a cached certificate from the directory; a missing or
// unreadable one is nil, to be obtained again.
func (i *Issuer) load(host string) *tls.Certificate {
	chainPath, keyPath := i.certPaths(host)
	chain, err1 := os.ReadFile(chainPath)
	key, err2 := os.ReadFile(keyPath)
	if (err1 != nil || err2 != nil) && i.shared() != nil {
		// Another replica may have obtained it.
		ctx, cancel := i.sharedCtx()
		raw, err := i.shared().Get(ctx, i.certKey(host))
		cancel()
		var held struct{ Chain, Key string }
		if err == nil && json.Unmarshal([]byte(raw), &held) == nil {
			chain, key, err1, err2 = []byte(held.Chain), []byte(held.Key), nil, nil
		}
	}
	if err1 != nil || err2 != nil {
		return nil
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil || cert.Leaf == nil || cert.Leaf.VerifyHostname(host) != nil {
		i.cfg.Log.Warn("acme: ignoring unreadable cached certificate", "host", host, "err", err)
		return nil
	}
	return &cert
}

func (i *Issuer) obtain(host string) (*tls.Certificate, error) {
	client, err := i.legoClient()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := client.Certificate.Obtain(certificate.ObtainRequest{Domains: []string{host}, Bundle: true})
	if err != nil {
		return nil, fmt.Errorf("acme: obtaining a certificate for %s: %w", host, err)
	}
	cert, err := tls.X509KeyPair(res.Certificate, res.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("acme: certificate for %s: %w", host, err)
	}
	chainPath, keyPath := i.certPaths(host)
	// Key first, so that a crash never leaves a chain without its key.
	if err := writeFile(keyPath, res.PrivateKey, 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(chainPath, res.Certificate, 0o644); err != nil {
		return nil, err
	}
	if i.shared() != nil {
		b, _ := json.Marshal(map[string]string{"chain": string(res.Certificate), "key": string(res.PrivateKey)})
		ctx, cancel := i.sharedCtx()
		if err := i.shared().Put(ctx, i.certKey(host), string(b)); err != nil {
			i.cfg.Log.Warn("acme: sharing a certificate with the other replicas", "host", host, "err", err)
		}
		cancel()
	}
	i.cfg.Log.Info("acme: obtained certificate", "host", host, "not_after", cert.Leaf.NotAfter, "dur", time.Since(start))
	return &cert, nil
}

// legoClient registers the account on first use and keeps the client.
func (i *Issuer) legoClient() (*lego.Client, error) {
	i.clientMu.Lock()
	defer i.clientMu.Unlock()
	if i.client != nil {
		return i.client, nil
	}
	key, err := i.accountKey()
	if err != nil {
		return nil, err
	}
	u := &user{email: i.cfg.Email, key: key}
	lc := lego.NewConfig(u)
	lc.CADirURL = i.cfg.Directory
	lc.HTTPClient = i.http
	lc.UserAgent = "pier"
	lc.Certificate.KeyType = certcrypto.EC256
	client, err := lego.NewClient(lc)
	if err != nil {
		return nil, fmt.Errorf("acme: directory %s: %w", i.cfg.Directory, err)
	}
	if err := client.Challenge.SetHTTP01Provider((*provider)(i)); err != nil {
		return nil, err
	}
	// Registering an existing key answers the existing account, so only
	// the key needs to persist.
	reg, err := client.Registration.Register(registration.RegisterOptions{TermsOfServiceAgreed: true})
	if err != nil {
		return nil, fmt.Errorf("acme: registering the account: %w", err)
	}
	u.reg = reg
	i.client = client
	return client, nil
}

func (i *Issuer) accountKey() (crypto.PrivateKey, error) {
	path := filepath.Join(i.dir, "account.key")
	if b, err := os.ReadFile(path); err == nil {
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("acme: %s: unreadable PEM", path)
		}
		return x509.ParseECPrivateKey(blk.Bytes)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

type user struct {
	email string
	key   crypto.PrivateKey
	reg   *registration.Resource
}

func (u *user) GetEmail() string                        { return u.email }
func (u *user) GetRegistration() *registration.Resource { return u.reg }
func (u *user) GetPrivateKey() crypto.PrivateKey        { return u.key }

// provider keeps key authorizations in memory while lego solves a
// challenge; ServeHTTP answers them.
type provider Issuer

func (p *provider) Present(domain, token, keyAuth string) error {
	p.chMu.Lock()
	p.challenges[token] = challenge{domain: strings.ToLower(domain), keyAuth: keyAuth}
	p.chMu.Unlock()
	if sh := p.cfg.Shared; sh != nil {
		ctx, cancel := (*Issuer)(p).sharedCtx()
		defer cancel()
		b, _ := json.Marshal(map[string]string{"domain": strings.ToLower(domain), "keyAuth": keyAuth})
		return sh.Put(ctx, "acme-challenge:"+token, string(b))
	}
	return nil
}

func (p *provider) CleanUp(domain, token, keyAuth string) error {
	p.chMu.Lock()
	delete(p.challenges, token)
	p.chMu.Unlock()
	if sh := p.cfg.Shared; sh != nil {
		ctx, cancel := (*Issuer)(p).sharedCtx()
		defer cancel()
		return sh.Delete(ctx, "acme-challenge:"+token)
	}
	return nil
}

// ServeHTTP answers GET /.well-known/acme-challenge/{token} with the key
// authorization of a challenge in progress for the request's host.
func (i *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.URL.Path, ChallengePrefix)
	i.chMu.RLock()
	c, found := i.challenges[token]
	i.chMu.RUnlock()
	if ok && !found && i.shared() != nil && token != "" {
		// Presented by another replica behind the same balancer.
		ctx, cancel := i.sharedCtx()
		raw, err := i.shared().Get(ctx, "acme-challenge:"+token)
		cancel()
		var held struct{ Domain, KeyAuth string }
		if err == nil && json.Unmarshal([]byte(raw), &held) == nil {
			c, found = challenge{domain: held.Domain, keyAuth: held.KeyAuth}, true
		}
	}
	if !ok || !found || c.domain != hostOnly(r.Host) || r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte(c.keyAuth))
}

func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
