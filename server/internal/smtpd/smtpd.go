// Package smtpd is Pier's inbound SMTP listener (emersion/go-smtp): mail
// for the addresses organisations made, and nothing else. It never relays.
// It is bounded as Postfix is: sessions in total and per source network,
// recipients and hard errors per session (past either it hangs up), and
// messages and refusals per second per network. A message is written to a
// spool as it arrives, checked against its inboxes' room, and only then,
// a few at a time, parsed (emersion/go-message), its DKIM signatures
// verified (emersion/go-msgauth), SPF checked (blitiri.com.ar/go/spf) and
// DMARC evaluated from both, then handed to the domain. Mail from inside
// Pier (tenant networks, loopback, the host) never passes SPF.
package smtpd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"blitiri.com.ar/go/spf"
	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decodes non-UTF-8 parts
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-msgauth/dmarc"
	"github.com/emersion/go-smtp"
	"golang.org/x/time/rate"

	"github.com/pierhq/pier/server/internal/cache"
	"github.com/pierhq/pier/server/internal/service"
)

// Mailboxes is what the listener needs from the domain.
type Mailboxes interface {
	Accepts(ctx context.Context, rcpt string) (bool, error)
	// Fits says whether a message of size bytes fits in the inbox rcpt
	// routes to, asked before the message is parsed.
	Fits(ctx context.Context, rcpt string, size int64) (bool, error)
	Deliver(ctx context.Context, d service.Delivery) (string, error)
}

// Resolver answers the DNS questions DKIM, SPF and DMARC ask.
type Resolver interface {
	spf.DNSResolver
}

// Config sets the listener up. Its limits follow Postfix's: a zero field
// takes the default named.
type Config struct {
	Mail Mailboxes
	// TLS offers STARTTLS when set.
	TLS *tls.Config
	// Hostname is the name the listener greets with.
	Hostname string
	// MaxMessageBytes bounds a message (default 10 MiB); MaxRecipients its
	// recipients (default 50; more are told 452 and sent in another
	// transaction).
	MaxMessageBytes int64
	MaxRecipients   int
	// Sessions bounds the sessions open at once (default 100) and
	// NetworkSessions those from one network, a /24 or a /64 (default 10):
	// smtpd_client_connection_count_limit.
	Sessions, NetworkSessions int
	// PeerRate bounds, per network, messages and hard errors per second
	// (default 10, burst 20): one bucket per /24 or /64, whatever address
	// of it a peer sends from.
	PeerRate  float64
	PeerBurst int
	// SessionRecipients bounds the RCPT commands of one session (default
	// 200) and HardErrors its 5xx answers (default 10,
	// smtpd_hard_error_limit): past either the session is told 421 and
	// the connection closed.
	SessionRecipients int
	HardErrors        int
	// SpoolDir is where messages are written while they arrive (default
	// the temporary directory); Parsers bounds the messages parsed and
	// stored at once (default 2), so memory does not grow with the
	// messages in flight.
	SpoolDir string
	Parsers  int
	// TenantNetworks are where tenants' code runs. Mail from them, from
	// loopback or from the host's own addresses shares its source with
	// every tenant, so SPF never passes for it (see authenticate).
	TenantNetworks []netip.Prefix
	Resolver       Resolver
	Log            *slog.Logger
}

// Server is the listener.
type Server struct {
	cfg     Config
	srv     *smtp.Server
	peers   *cache.Cache[netip.Prefix, *rate.Limiter]
	parsers chan struct{}
	// host are the host's own addresses.
	host []netip.Addr

	mu        sync.Mutex
	open      int
	byNetwork map[netip.Prefix]int
}

// New builds the listener.
func New(cfg Config) *Server {
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 10 << 20
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = 50
	}
	if cfg.Sessions <= 0 {
		cfg.Sessions = 100
	}
	if cfg.NetworkSessions <= 0 {
		cfg.NetworkSessions = 10
	}
	if cfg.SessionRecipients <= 0 {
		cfg.SessionRecipients = 200
	}
	if cfg.HardErrors <= 0 {
		cfg.HardErrors = 10
	}
	if cfg.Parsers <= 0 {
		cfg.Parsers = 2
	}
	if cfg.PeerRate <= 0 {
		cfg.PeerRate, cfg.PeerBurst = 10, 20
	}
	if cfg.PeerBurst <= 0 {
		// At least one: a burst of zero would refuse every message, however
		// slowly the peer sends.
		cfg.PeerBurst = max(1, int(cfg.PeerRate*2))
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost"
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	s := &Server{cfg: cfg, peers: cache.New[netip.Prefix, *rate.Limiter](4096, 0, nil),
		parsers: make(chan struct{}, cfg.Parsers), byNetwork: map[netip.Prefix]int{}, host: hostAddrs()}
	srv := smtp.NewServer(s)
	srv.Domain = cfg.Hostname
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.ReadTimeout = time.Minute
	srv.WriteTimeout = time.Minute
	srv.TLSConfig = cfg.TLS
	srv.ErrorLog = slogLogger{cfg.Log}
	s.srv = srv
	return s
}

// hostAddrs are the addresses of the host's interfaces.
func hostAddrs() []netip.Addr {
	as, _ := net.InterfaceAddrs()
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Printf(format string, v ...any) { l.l.Warn(fmt.Sprintf(format, v...)) }
func (l slogLogger) Println(v ...any)               { l.l.Warn(fmt.Sprint(v...)) }

// Serve answers SMTP on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.Serve(guard{Listener: ln, s: s})
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for sessions to end.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Close stops at once, cutting open sessions.
func (s *Server) Close() error { return s.srv.Close() }

// NewSession starts a session for a connection.
func (s *Server) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{s: s, c: s.connOf(c), peer: addrOf(c.Conn().RemoteAddr()), helo: c.Hostname()}, nil
}

// limiter is the bucket of a peer's network.
func (s *Server) limiter(a netip.Addr) *rate.Limiter {
	n := networkOf(a)
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.peers.Get(n); ok {
		return l
	}
	l := rate.NewLimiter(rate.Limit(s.cfg.PeerRate), s.cfg.PeerBurst)
	s.peers.Put(n, l)
	return l
}

var (
	errTooFast           = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many messages from your network; try again later"}
	errTooManyRecipients = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 5, 3}, Message: "Too many recipients in one session; closing"}
	errTooManyErrors     = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many errors; closing"}
	errTempFail          = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure; try again"}
	errNoMailbox         = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such mailbox here, and this server relays for no one"}
	errMailboxFull       = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 2, 2}, Message: "Mailbox full"}
)

type session struct {
	s    *Server
	c    *conn
	peer netip.Addr
	helo string
	from string
	// size is what MAIL FROM declared (SIZE=), 0 when nothing was.
	size int64
	rcpt []string
}

func (se *session) Reset()        { se.from, se.size, se.rcpt = "", 0, nil }
func (se *session) Logout() error { return nil }

// closing answers 421 and closes the connection once the answer is out.
func (se *session) closing(err *smtp.SMTPError) error {
	se.c.hangUp.Store(true)
	return err
}

// refused passes a command's answer on, counting a 5xx against the
// session's hard errors and its network's bucket: past either, the
// session ends.
func (se *session) refused(err error) error {
	var e *smtp.SMTPError
	if !errors.As(err, &e) || e.Code/100 != 5 {
		return err
	}
	if !se.c.hardError() {
		return se.closing(errTooManyErrors)
	}
	if !se.s.limiter(se.peer).Allow() {
		return se.closing(errTooFast)
	}
	return err
}

func (se *session) Mail(from string, opts *smtp.MailOptions) error {
	if !se.s.limiter(se.peer).Allow() {
		return se.closing(errTooFast)
	}
	se.from = from
	if opts != nil {
		se.size = opts.Size
	}
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if !se.c.recipient() {
		return se.closing(errTooManyRecipients)
	}
	return se.refused(se.addRcpt(to))
}

func (se *session) addRcpt(to string) error {
	// A recipient named twice gets one copy (RFC 5321 §3.3 allows it).
	if slices.ContainsFunc(se.rcpt, func(r string) bool { return strings.EqualFold(r, to) }) {
		return nil
	}
	ctx := context.Background()
	ok, err := se.s.cfg.Mail.Accepts(ctx, to)
	if err != nil {
		return errTempFail
	}
	if !ok {
		// Neither an address of ours nor a relay: refused, never forwarded.
		return errNoMailbox
	}
	// A full inbox is said at once, before the message is sent: by the
	// size declared, or by a single byte when none was.
	if ok, err := se.s.cfg.Mail.Fits(ctx, to, max(se.size, 1)); err != nil {
		return errTempFail
	} else if !ok {
		return errMailboxFull
	}
	se.rcpt = append(se.rcpt, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	return se.refused(se.data(r))
}

// data writes the message to the spool as it arrives (go-smtp's reader
// stops it at MaxMessageBytes), checks that it fits every recipient's
// inbox, and only then, a few messages at a time, reads it back to parse
// and store.
func (se *session) data(r io.Reader) error {
	if len(se.rcpt) == 0 {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 5, 1}, Message: "No valid recipients"}
	}
	f, err := os.CreateTemp(se.s.cfg.SpoolDir, "smtp-*")
	if err != nil {
		se.s.cfg.Log.Error("spooling mail", "err", err)
		return errTempFail
	}
	defer os.Remove(f.Name())
	defer f.Close()
	size, err := io.Copy(f, r)
	if err != nil {
		var e *smtp.SMTPError
		if errors.As(err, &e) {
			return err
		}
		if _, ok := err.(*fs.PathError); ok {
			se.s.cfg.Log.Error("spooling mail", "err", err)
			return errTempFail
		}
		return err
	}
	ctx := context.Background()
	for _, rc := range se.rcpt {
		if ok, err := se.s.cfg.Mail.Fits(ctx, rc, size); err != nil {
			return errTempFail
		} else if !ok {
			return errMailboxFull
		}
	}

	se.s.parsers <- struct{}{}
	defer func() { <-se.s.parsers }()
	raw := make([]byte, size)
	if _, err := f.ReadAt(raw, 0); err != nil {
		se.s.cfg.Log.Error("reading spooled mail", "err", err)
		return errTempFail
	}
	d, err := se.s.parse(se.from, se.helo, se.peer, raw)
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "The message cannot be parsed: " + err.Error()}
	}
	for _, rc := range se.rcpt {
		d.Rcpt = rc
		if _, err := se.s.cfg.Mail.Deliver(ctx, d); errors.Is(err, service.ErrInboxFull) {
			return errMailboxFull
		} else if err != nil {
			se.s.cfg.Log.Error("delivering mail", "rcpt", rc, "err", err)
			return errTempFail
		}
	}
	return nil
}

// maxParts bounds the MIME parts read from one message.
const maxParts = 200

// parse reads a message's parts and checks its authentication.
func (s *Server) parse(mailFrom, helo string, peer netip.Addr, raw []byte) (service.Delivery, error) {
	d := service.Delivery{MailFrom: mailFrom, Raw: raw, Headers: map[string][]string{}}
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return d, err
	}
	if mr == nil {
		// A body in an encoding nobody knows: keep the headers and the
		// body as it came.
		m, err := netmail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			return d, err
		}
		for k, v := range m.Header {
			if len(d.Headers) < 100 {
				d.Headers[k] = v
			}
		}
		d.Subject, d.FromHeader = m.Header.Get("Subject"), m.Header.Get("From")
		if from, err := m.Header.AddressList("From"); err == nil && len(from) > 0 {
			d.FromHeader = from[0].Address
		}
		body, _ := io.ReadAll(io.LimitReader(m.Body, s.cfg.MaxMessageBytes))
		d.Text = string(body)
		d.Auth = s.authenticate(mailFrom, helo, peer, d.FromHeader, raw)
		return d, nil
	}
	fields := mr.Header.Fields()
	for fields.Next() {
		k := fields.Key()
		if len(d.Headers) < 100 {
			d.Headers[k] = append(d.Headers[k], fields.Value())
		}
	}
	d.Subject, _ = mr.Header.Subject()
	if from, err := mr.Header.AddressList("From"); err == nil && len(from) > 0 {
		d.FromHeader = from[0].Address
	} else {
		d.FromHeader = mr.Header.Get("From")
	}
	for parts := 0; parts < maxParts; parts++ {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if message.IsUnknownCharset(err) || message.IsUnknownEncoding(err) {
				continue
			}
			return d, err
		}
		body, _ := io.ReadAll(io.LimitReader(p.Body, s.cfg.MaxMessageBytes))
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := h.ContentType()
			switch {
			case ct == "text/html" && d.HTML == "":
				d.HTML = string(body)
			case (ct == "text/plain" || ct == "") && d.Text == "":
				d.Text = string(body)
			}
		case *mail.AttachmentHeader:
			name, _ := h.Filename()
			ct, _, _ := h.ContentType()
			d.Attachments = append(d.Attachments, service.Attachment{Filename: name, ContentType: ct, Data: body})
		}
	}
	d.Auth = s.authenticate(mailFrom, helo, peer, d.FromHeader, raw)
	return d, nil
}

// authenticate verifies DKIM, checks SPF for the envelope sender, and
// evaluates DMARC for the From domain from the two (RFC 7489 §4.2).
func (s *Server) authenticate(mailFrom, helo string, peer netip.Addr, fromHeader string, raw []byte) service.AuthResults {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lookupTXT := func(name string) ([]string, error) { return s.cfg.Resolver.LookupTXT(ctx, name) }
	res := service.AuthResults{DKIM: "none", SPF: "none", DMARC: "none"}
	fromDomain := domainOf(fromHeader)

	var dkimPass []string
	if vs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: lookupTXT, MaxVerifications: 5}); err == nil {
		for _, v := range vs {
			switch {
			case v.Err == nil:
				res.DKIM = "pass"
				dkimPass = append(dkimPass, strings.ToLower(v.Domain))
				dom := strings.ToLower(v.Domain)
				res.DKIMDomain = dom
			case res.DKIM != "pass" && dkim.IsTempFail(v.Err):
				res.DKIM = "temperror"
			case res.DKIM != "pass" && dkim.IsPermFail(v.Err):
				res.DKIM = "fail"
			}
		}
	} else {
		res.DKIM = "permerror"
	}

	sender := mailFrom
	if sender == "" {
		sender = "postmaster@" + helo
	}
	spfDomain := domainOf(sender)
	if r, _ := spf.CheckHostWithSender(net.IP(peer.AsSlice()), helo, sender, spf.WithResolver(s.cfg.Resolver), spf.WithContext(ctx)); r != "" {
		res.SPF = strings.ToLower(string(r))
	}
	if res.SPF == "pass" && s.insider(peer) {
		// Every tenant's code sends from here: that a domain's SPF allows
		// this address says nothing about which tenant wrote the message.
		// "policy" is RFC 8601's word for a pass that local policy refuses;
		// DMARC then rests on DKIM alone.
		res.SPF = "policy"
	}

	rec, err := dmarc.LookupWithOptions(fromDomain, &dmarc.LookupOptions{LookupTXT: lookupTXT})
	switch {
	case err != nil && dmarc.IsTempFail(err):
		res.DMARC = "temperror"
	case err != nil:
		res.DMARC = "none"
	default:
		aligned := func(d string, mode dmarc.AlignmentMode) bool {
			if mode == dmarc.AlignmentStrict {
				return d == fromDomain
			}
			return d == fromDomain || strings.HasSuffix(d, "."+fromDomain) || strings.HasSuffix(fromDomain, "."+d)
		}
		res.DMARC = "fail"
		for _, d := range dkimPass {
			if aligned(d, rec.DKIMAlignment) {
				res.DMARC = "pass"
			}
		}
		if res.SPF == "pass" && aligned(spfDomain, rec.SPFAlignment) {
			res.DMARC = "pass"
		}
	}
	return res
}

// insider says whether a source is inside Pier: a tenant network,
// loopback, or one of the host's own addresses.
func (s *Server) insider(peer netip.Addr) bool {
	peer = peer.Unmap()
	if !peer.IsValid() || peer.IsLoopback() || peer.IsUnspecified() || slices.Contains(s.host, peer) {
		return true
	}
	return slices.ContainsFunc(s.cfg.TenantNetworks, func(p netip.Prefix) bool { return p.Contains(peer) })
}

func domainOf(addr string) string {
	_, d, _ := strings.Cut(strings.ToLower(strings.Trim(addr, "<> ")), "@")
	return d
}
