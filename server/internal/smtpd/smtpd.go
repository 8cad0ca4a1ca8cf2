// Package smtpd is Pier's inbound SMTP listener (emersion/go-smtp): mail
// for the addresses organisations made, and nothing else. It never relays.
// Messages are bounded in size and recipients, peers in rate; STARTTLS
// uses the edge's certificates. Each message is parsed (emersion/
// go-message), its DKIM signatures verified (emersion/go-msgauth), SPF
// checked (blitiri.com.ar/go/spf) and DMARC evaluated from both, then
// handed to the domain.
package smtpd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/netip"
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

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/cache"
	"github.com/pierhq/pier/server/internal/service"
)

// Mailboxes is what the listener needs from the domain.
type Mailboxes interface {
	Accepts(ctx context.Context, rcpt string) (bool, error)
	Deliver(ctx context.Context, d service.Delivery) (string, error)
}

// Resolver answers the DNS questions DKIM, SPF and DMARC ask.
type Resolver interface {
	spf.DNSResolver
}

// Config sets the listener up.
type Config struct {
	Mail Mailboxes
	// TLS offers STARTTLS when set.
	TLS *tls.Config
	// Hostname is the name the listener greets with.
	Hostname string
	// MaxMessageBytes bounds a message (default 10 MiB); MaxRecipients its
	// recipients (default 50).
	MaxMessageBytes int64
	MaxRecipients   int
	// PeerRate bounds messages per second per peer address (default 10,
	// burst 20).
	PeerRate  float64
	PeerBurst int
	Resolver  Resolver
	Log       *slog.Logger
}

// Server is the listener.
type Server struct {
	cfg   Config
	srv   *smtp.Server
	peers *cache.Cache[netip.Addr, *rate.Limiter]
	mu    sync.Mutex
}

// New builds the listener.
func New(cfg Config) *Server {
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 10 << 20
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = 50
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
	s := &Server{cfg: cfg, peers: cache.New[netip.Addr, *rate.Limiter](4096, 0, nil)}
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

type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Printf(format string, v ...any) { l.l.Warn(fmt.Sprintf(format, v...)) }
func (l slogLogger) Println(v ...any)               { l.l.Warn(fmt.Sprint(v...)) }

// Serve answers SMTP on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.Serve(ln)
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
	addr, _ := netip.ParseAddrPort(c.Conn().RemoteAddr().String())
	return &session{s: s, peer: addr.Addr().Unmap(), helo: c.Hostname()}, nil
}

func (s *Server) limiter(a netip.Addr) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.peers.Get(a); ok {
		return l
	}
	l := rate.NewLimiter(rate.Limit(s.cfg.PeerRate), s.cfg.PeerBurst)
	s.peers.Put(a, l)
	return l
}

type session struct {
	s    *Server
	peer netip.Addr
	helo string
	from string
	rcpt []string
}

func (se *session) Reset()        { se.from, se.rcpt = "", nil }
func (se *session) Logout() error { return nil }

func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	if !se.s.limiter(se.peer).Allow() {
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many messages from your address; try again later"}
	}
	se.from = from
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	// A recipient named twice gets one copy (RFC 5321 §3.3 allows it).
	if slices.ContainsFunc(se.rcpt, func(r string) bool { return strings.EqualFold(r, to) }) {
		return nil
	}
	ok, err := se.s.cfg.Mail.Accepts(context.Background(), to)
	if err != nil {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure; try again"}
	}
	if !ok {
		// Neither an address of ours nor a relay: refused, never forwarded.
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such mailbox here, and this server relays for no one"}
	}
	se.rcpt = append(se.rcpt, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(se.rcpt) == 0 {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 5, 1}, Message: "No valid recipients"}
	}
	d, err := se.s.parse(se.from, se.helo, se.peer, raw)
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "The message cannot be parsed: " + err.Error()}
	}
	ctx := context.Background()
	for _, rc := range se.rcpt {
		d.Rcpt = rc
		if _, err := se.s.cfg.Mail.Deliver(ctx, d); errors.Is(err, service.ErrInboxFull) {
			return &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 2, 2}, Message: "Mailbox full"}
		} else if err != nil {
			se.s.cfg.Log.Error("delivering mail", "rcpt", rc, "err", err)
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure; try again"}
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
func (s *Server) authenticate(mailFrom, helo string, peer netip.Addr, fromHeader string, raw []byte) models.AuthResults {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lookupTXT := func(name string) ([]string, error) { return s.cfg.Resolver.LookupTXT(ctx, name) }
	res := models.AuthResults{Dkim: "none", Spf: "none", Dmarc: "none"}
	fromDomain := domainOf(fromHeader)

	var dkimPass []string
	if vs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: lookupTXT, MaxVerifications: 5}); err == nil {
		for _, v := range vs {
			switch {
			case v.Err == nil:
				res.Dkim = "pass"
				dkimPass = append(dkimPass, strings.ToLower(v.Domain))
				dom := strings.ToLower(v.Domain)
				res.DkimDomain = &dom
			case res.Dkim != "pass" && dkim.IsTempFail(v.Err):
				res.Dkim = "temperror"
			case res.Dkim != "pass" && dkim.IsPermFail(v.Err):
				res.Dkim = "fail"
			}
		}
	} else {
		res.Dkim = "permerror"
	}

	sender := mailFrom
	if sender == "" {
		sender = "postmaster@" + helo
	}
	spfDomain := domainOf(sender)
	if r, _ := spf.CheckHostWithSender(net.IP(peer.AsSlice()), helo, sender, spf.WithResolver(s.cfg.Resolver), spf.WithContext(ctx)); r != "" {
		res.Spf = strings.ToLower(string(r))
	}

	rec, err := dmarc.LookupWithOptions(fromDomain, &dmarc.LookupOptions{LookupTXT: lookupTXT})
	switch {
	case err != nil && dmarc.IsTempFail(err):
		res.Dmarc = "temperror"
	case err != nil:
		res.Dmarc = "none"
	default:
		aligned := func(d string, mode dmarc.AlignmentMode) bool {
			if mode == dmarc.AlignmentStrict {
				return d == fromDomain
			}
			return d == fromDomain || strings.HasSuffix(d, "."+fromDomain) || strings.HasSuffix(fromDomain, "."+d)
		}
		res.Dmarc = "fail"
		for _, d := range dkimPass {
			if aligned(d, rec.DKIMAlignment) {
				res.Dmarc = "pass"
			}
		}
		if res.Spf == "pass" && aligned(spfDomain, rec.SPFAlignment) {
			res.Dmarc = "pass"
		}
	}
	return res
}

func domainOf(addr string) string {
	_, d, _ := strings.Cut(strings.ToLower(strings.Trim(addr, "<> ")), "@")
	return d
}
