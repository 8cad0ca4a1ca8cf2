package service

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// putBlob keeps data by its SHA-256 and answers the hash.
func (s *outbox) putBlob(ctx context.Context, data []byte, now time.Time) (string, error) {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	return h, s.store.Bundles().PutBlob(ctx, h, data, now)
}

// compose writes a plain-text message and signs it with the sending
// domain's DKIM key.
func (s *outbox) compose(ctx context.Context, from string, to []string, subject, text string) ([]byte, string, error) {
	_, domain, err := normAddress(from)
	if err != nil {
		return nil, "", err
	}
	d, err := s.store.Mail().Domain(ctx, domain)
	if err != nil {
		return nil, "", err
	}
	block, _ := pem.Decode([]byte(d.PrivateKey))
	if block == nil {
		return nil, "", errors.New("the DKIM key is unreadable")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, "", err
	}
	var msg bytes.Buffer
	id := auth.ID("mid")
	fmt.Fprintf(&msg, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s@%s>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n",
		from, strings.Join(to, ", "), headerSafe(subject), s.Now().UTC().Format(time.RFC1123Z), id, domain)
	msg.WriteString(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\n", "\r\n"))
	var signed bytes.Buffer
	if err := dkim.Sign(&signed, &msg, &dkim.SignOptions{Domain: domain, Selector: d.Selector, Signer: key.(crypto.Signer),
		HeaderKeys: []string{"From", "To", "Subject", "Date", "Message-ID"}}); err != nil {
		return nil, "", err
	}
	return signed.Bytes(), id + "@" + domain, nil
}

// headerSafe keeps a header value on one line.
func headerSafe(v string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
}

// SendRequest is a message to send: from one of the organisation's
// addresses, to any.
type SendRequest struct {
	From          string
	To            []string
	Subject, Text string
}

// SentMessage is a message the relay took, signed with DKIMSelector, and
// what is left of the budget that pays the sender's mail. Sent mail cannot
// be called back.
type SentMessage struct {
	ID, From        string
	To              []string
	Relay           string
	DKIMSelector    string
	BudgetRemaining money.MicroUSD
}

// Send signs a message with the sender's domain key and hands it to the
// relay.
func (s *Mail) Send(ctx context.Context, p *auth.Principal, req SendRequest) (*SentMessage, error) {
	if s.relay == nil {
		return nil, apierr.New("mail:relay_unconfigured", "sending needs a relay: the operator starts pier server with --smtp-relay smtp://HOST:PORT (PIER_SMTP_RELAY)").
			WithActions(actions.Manual("configure_smtp_relay", "human"))
	}
	local, domain, err := normAddress(req.From)
	if err != nil {
		return nil, apierr.Newf("input:invalid", "%v", err)
	}
	// The domain is the caller's before its addresses are looked up, so
	// that another organisation's addresses answer as a domain without
	// mail, whether they exist or not.
	if d, err := s.store.Mail().Domain(ctx, domain); err != nil || d.OrgID != p.OrgID || MailState(d.State) != MailReady {
		return nil, apierr.Newf("mail:not_set_up", "%s has no mail set up in your organisation", domain)
	}
	if _, err := s.store.Mail().Route(ctx, local+"@"+domain, domain); err != nil {
		return nil, apierr.Newf("mail:not_set_up", "%s is not one of your addresses; create it first", req.From).
			WithActions(actions.Tool("create_email_address", "agent", map[string]any{"address": req.From}))
	}
	to := req.To
	msg, id, err := s.compose(ctx, req.From, to, req.Subject, req.Text)
	if err != nil {
		return nil, err
	}
	if err := s.relay.Send(ctx, req.From, to, msg); err != nil {
		return nil, apierr.Newf("provider:failed", "the relay refused the message: %v", err)
	}
	if _, err := s.store.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "send_message", ObjectType: "message", ObjectID: id,
		Details: map[string]any{"from": req.From, "to": to}}, s.Now()); err != nil {
		return nil, err
	}
	left, err := mailBudget(ctx, s.store, p.OrgID, domain)
	if err != nil {
		return nil, err
	}
	return &SentMessage{ID: id, From: req.From, To: to, Relay: s.relay.Name(), DKIMSelector: DKIMSelector, BudgetRemaining: left}, nil
}

func hostOnly(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexAny(u, ":/"); i >= 0 {
		u = u[:i]
	}
	return u
}

// systemMessage writes a message Pier sends on its own account, signed
// with the sending domain's DKIM key, as send_message's are, when that
// domain's mail is set up; unsigned when it is not.
func (s *outbox) systemMessage(ctx context.Context, from, to, subject, text string) ([]byte, error) {
	if _, domain, err := normAddress(from); err == nil {
		if d, err := s.store.Mail().Domain(ctx, domain); err == nil && MailState(d.State) == MailReady {
			msg, _, err := s.compose(ctx, from, []string{to}, subject, text)
			return msg, err
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	msg, _, err := s.plainMessage(from, to, subject, text)
	return msg, err
}

// plainMessage writes an unsigned system message.
func (s *outbox) plainMessage(from, to, subject, text string) ([]byte, string, error) {
	id := auth.ID("mid")
	var msg bytes.Buffer
	fmt.Fprintf(&msg, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s@pier>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		from, to, headerSafe(subject), s.Now().UTC().Format(time.RFC1123Z), id)
	msg.WriteString(strings.ReplaceAll(text, "\n", "\r\n"))
	return msg.Bytes(), id, nil
}

// deliverAnywhere delivers to an address Pier hosts directly, and to any
// other through the relay.
func (s *outbox) deliverAnywhere(ctx context.Context, from, to string, msg []byte) error {
	if ok, err := s.Accepts(ctx, to); err != nil {
		return err
	} else if ok {
		_, err := s.Deliver(ctx, Delivery{MailFrom: from, Rcpt: to, FromHeader: from, Subject: subjectOf(msg), Text: bodyOf(msg),
			Headers: map[string][]string{}, Auth: AuthResults{DKIM: "none", SPF: "none", DMARC: "none"}, Raw: msg})
		return err
	}
	if s.relay == nil {
		return apierr.Newf("mail:relay_unconfigured", "%s is not an address Pier hosts, and sending elsewhere needs a relay: the operator starts pier server with --smtp-relay smtp://HOST:PORT (PIER_SMTP_RELAY)", to).
			WithActions(actions.Manual("configure_smtp_relay", "human"))
	}
	return s.relay.Send(ctx, from, []string{to}, msg)
}

func subjectOf(msg []byte) string {
	for _, l := range strings.Split(string(msg), "\r\n") {
		if l == "" {
			break
		}
		if v, ok := strings.CutPrefix(l, "Subject: "); ok {
			return v
		}
	}
	return ""
}

func bodyOf(msg []byte) string {
	_, b, _ := strings.Cut(string(msg), "\r\n\r\n")
	return strings.ReplaceAll(b, "\r\n", "\n")
}

// rdapHandle names a registration publicly without showing the task that
// bought it.
func rdapHandle(ref string) string {
	sum := sha256.Sum256([]byte("rdap\x00" + ref))
	return "PIER-" + strings.ToUpper(hex.EncodeToString(sum[:6]))
}

// RDAP answers RFC 9083 for a domain Pier sold, the registrant redacted
// (RFC 9537).
func (s *Mail) RDAP(ctx context.Context, domain string) (map[string]any, error) {
	domain = strings.ToLower(domain)
	pu, err := s.store.Domains().PurchaseByDomain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Newf("not_found:resource", "%s is not a domain this registrar sold", domain)
	}
	if err != nil {
		return nil, err
	}
	out := map[string]any{
		"objectClassName": "domain",
		"ldhName":         domain,
		"handle":          rdapHandle(pu.Ref),
		"status":          []string{"active"},
		"rdapConformance": []string{"rdap_level_0", "redacted"},
		"events": []any{
			map[string]any{"eventAction": "registration", "eventDate": pu.CreatedAt.UTC().Format(time.RFC3339)},
			map[string]any{"eventAction": "expiration", "eventDate": pu.CreatedAt.AddDate(pu.Years, 0, 0).UTC().Format(time.RFC3339)},
		},
		"nameservers": []any{
			map[string]any{"objectClassName": "nameserver", "ldhName": "ns1." + domain},
			map[string]any{"objectClassName": "nameserver", "ldhName": "ns2." + domain},
		},
		"notices": []any{map[string]any{"title": "Sandbox registrar", "description": []string{"Pier's sandbox registrar; nothing here is registered on the internet."}}},
	}
	if r, err := s.store.Mail().CurrentRegistrant(ctx, pu.OrgID, domain); err == nil {
		var c RegistrantContact
		json.Unmarshal([]byte(r.Contact), &c)
		out["entities"] = []any{map[string]any{
			"objectClassName": "entity",
			"roles":           []string{"registrant"},
			"vcardArray": []any{"vcard", []any{
				[]any{"version", map[string]any{}, "text", "4.0"},
				[]any{"fn", map[string]any{}, "text", ""},
				[]any{"adr", map[string]any{"cc": c.Country}, "text", []any{"", "", "", "", "", "", ""}},
			}},
			"events": []any{map[string]any{"eventAction": "last changed", "eventDate": r.ConfirmedAt.UTC().Format(time.RFC3339)}},
		}}
		out["redacted"] = []any{
			map[string]any{"name": map[string]any{"type": "Registrant Name"}, "prePath": "$.entities[?(@.roles[0]=='registrant')].vcardArray[1][?(@[0]=='fn')][3]", "method": "emptyValue", "reason": map[string]any{"type": "Server policy"}},
			map[string]any{"name": map[string]any{"type": "Registrant Street"}, "method": "emptyValue", "reason": map[string]any{"type": "Server policy"}},
			map[string]any{"name": map[string]any{"type": "Registrant Email"}, "method": "removal", "reason": map[string]any{"type": "Server policy"}},
		}
	}
	return out, nil
}
