package service

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// MailRelay sends outbound mail through a smarthost.
type MailRelay interface {
	Send(ctx context.Context, from string, to []string, msg []byte) error
	// Name says which relay, for receipts.
	Name() string
}

// DefaultInboxBytes bounds an inbox's stored messages.
const DefaultInboxBytes = 50 << 20

// Email setup steps.
const (
	StepDKIMKey    = "dkim_key"
	StepMailRecord = "mail_records"
	StepMailVerify = "verify_dns"
)

// DKIMSelector names the key in DNS: <selector>._domainkey.<domain>.
const DKIMSelector = "pier1"

// MailHost is the name the domain's MX points at.
func MailHost(domain string) string { return "mail." + domain }

// mailRecords are what setup_email adds to a zone.
func mailRecords(domain string, z zone.ZoneConfig, dkimPublic string) []zone.Record {
	recs := []zone.Record{
		{Name: "@", Type: "MX", TTL: 300, Value: "10 " + MailHost(domain) + "."},
		{Name: "@", Type: "TXT", TTL: 300, Value: `"` + SPFRecord(z.MailSenders) + `"`},
		{Name: "_dmarc", Type: "TXT", TTL: 300, Value: `"v=DMARC1; p=quarantine; adkim=s; aspf=s"`},
		{Name: DKIMSelector + "._domainkey", Type: "TXT", TTL: 300, Value: `"v=DKIM1; k=ed25519; p=` + dkimPublic + `"`},
	}
	if z.EdgeIPv4 != nil {
		recs = append(recs, zone.Record{Name: "mail", Type: "A", TTL: 300, Value: z.EdgeIPv4.String()})
	}
	if z.EdgeIPv6 != nil {
		recs = append(recs, zone.Record{Name: "mail", Type: "AAAA", TTL: 300, Value: z.EdgeIPv6.String()})
	}
	return recs
}

// SPFRecord is the SPF policy of a domain whose mail Pier hosts: only the
// relays that send its outbound mail, never the MX. The MX is the host
// every tenant's code runs on, and naming it would let any tenant pass SPF
// for every domain here. Mail Pier delivers to its own inboxes never goes
// over SMTP, and DKIM (adkim=s) carries DMARC for relayed mail when no
// relay is named.
func SPFRecord(senders []string) string {
	return strings.Join(append(append([]string{"v=spf1"}, senders...), "-all"), " ")
}

// SPFMechanism turns an operator's name for a relay into an SPF
// mechanism: an address or a prefix becomes ip4: or ip6:, a host name a:,
// and a mechanism (ip4:, ip6:, a:, include:) stays as it is.
func SPFMechanism(relay string) (string, error) {
	relay = strings.TrimSpace(relay)
	if a, err := netip.ParseAddr(relay); err == nil {
		relay = netip.PrefixFrom(a, a.BitLen()).String()
	}
	if p, err := netip.ParsePrefix(relay); err == nil {
		mech := "ip4:"
		if p.Addr().Is6() {
			mech = "ip6:"
		}
		if p.IsSingleIP() {
			return mech + p.Addr().String(), nil
		}
		return mech + p.Masked().String(), nil
	}
	for _, mech := range []string{"ip4:", "ip6:", "a:", "include:"} {
		if rest, ok := strings.CutPrefix(strings.ToLower(relay), mech); ok && rest != "" && !strings.ContainsAny(rest, " \t\"") {
			return mech + rest, nil
		}
	}
	if isHostName(relay) {
		return "a:" + strings.ToLower(relay), nil
	}
	return "", fmt.Errorf("a mail relay is an address, a prefix, a host name or an SPF mechanism (ip4:, ip6:, a:, include:), not %q", relay)
}

func isHostName(s string) bool {
	labels := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(labels) < 2 || len(s) > 253 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func isMailRecord(r zone.Record) bool {
	switch {
	case r.Type == "MX" && r.Name == "@":
		return true
	case r.Type == "TXT" && r.Name == "@" && strings.HasPrefix(r.Value, `"v=spf1`):
		return true
	case r.Name == "_dmarc" || strings.HasSuffix(r.Name, "._domainkey"):
		return true
	case r.Name == "mail" && (r.Type == "A" || r.Type == "AAAA"):
		return true
	}
	return false
}

// mailPayload is what an email setup task carries.
type mailPayload struct {
	Domain       string         `json:"domain"`
	ProjectID    string         `json:"projectId"`
	QuoteID      string         `json:"quoteId"`
	ChargedMicro money.MicroUSD `json:"chargedMicroUsd"`
	Receipt      *Receipt       `json:"receipt,omitempty"`
	Undo         *Undoing       `json:"undo,omitempty"`
}

// Setup starts the task that sets up mail for an owned domain, paid by
// quoteID, a quote for the mail add-on.
func (s *Mail) Setup(ctx context.Context, p *auth.Principal, domain, quoteID string) (*Task, error) {
	domain = strings.ToLower(domain)
	state, err := s.domains.State(ctx, p, domain)
	if err != nil {
		return nil, err
	}
	if state != DomainOwned {
		return nil, apierr.Newf("conflict:state", "%s is not a domain your organisation owns; mail is set up on owned domains", domain).
			WithActions(actions.Tool("list_domains", "agent", nil))
	}
	if view, ok := s.setupUnderWay(ctx, p, domain); ok {
		return view, nil
	}
	q, err := s.store.Quotes().Get(ctx, p.OrgID, quoteID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Newf("not_found:resource", "no quote %s in your organisation", quoteID)
	}
	if err != nil {
		return nil, err
	}
	if err := mailOnlyQuote(q, domain); err != nil {
		return nil, err
	}
	privateKey, publicKey, err := newDKIMKey()
	if err != nil {
		return nil, err
	}
	now := s.Now().UTC()
	task := store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, ProjectID: q.ProjectID, Kind: "email_setup", State: "queued", CreatedAt: now, UpdatedAt: now}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		return s.claimAndCharge(ctx, tx, p, q, &task, store.MailDomain{Domain: domain, OrgID: p.OrgID, Selector: DKIMSelector,
			PrivateKey: privateKey, PublicKey: publicKey, TaskID: task.ID, CreatedAt: now, UpdatedAt: now})
	})
	if errors.Is(err, errMailClaimed) {
		if view, ok := s.setupUnderWay(ctx, p, domain); ok {
			return view, nil
		}
		return nil, apierr.Newf("conflict:state", "mail for %s is being set up by another request; look again", domain).
			WithActions(actions.Retry("setup_email", "agent", map[string]any{"domain": domain, "quoteId": quoteID}, 1))
	}
	if err != nil {
		return nil, err
	}
	s.enqueue(ctx, task.ID, "email setup")
	return s.tasks.Get(ctx, p.OrgID, task.ID)
}

// mailOnlyQuote checks a quote prices mail for the domain and nothing else:
// the whole quote is consumed, and a quote that also prices a domain or a
// service would charge for what mail setup does not buy.
func mailOnlyQuote(q store.Quote, domain string) error {
	var items []pricedItem
	json.Unmarshal([]byte(q.Items), &items)
	if !slices.ContainsFunc(items, func(it pricedItem) bool { return it.Kind == ItemEmail && it.Domain == domain }) {
		return apierr.Newf("input:invalid", "quote %s does not price mail for %s; quote {\"kind\": \"email\", \"domain\": %q}", q.ID, domain, domain).
			WithActions(actions.Tool("create_quote", "agent", map[string]any{"projectId": q.ProjectID,
				"items": []any{map[string]any{"kind": "email", "domain": domain}}}))
	}
	var others []string
	for _, it := range items {
		if it.Kind != ItemEmail || it.Domain != domain {
			others = append(others, it.label())
		}
	}
	if len(others) > 0 {
		return apierr.Newf("conflict:quote_mismatch", "quote %s also prices %s, which setting up mail on %s does not buy; quote the mail alone", q.ID, strings.Join(others, ", "), domain).
			WithActions(actions.Tool("create_quote", "agent", map[string]any{"projectId": q.ProjectID,
				"items": []any{map[string]any{"kind": "email", "domain": domain}}}))
	}
	return nil
}

// claimAndCharge claims the domain's mail before consuming the quote, in
// one transaction: of concurrent setups one claims and pays, and the others
// answer its task. The task goes in with the charge's receipt and undo.
func (s *Mail) claimAndCharge(ctx context.Context, tx *store.Tx, p *auth.Principal, q store.Quote, task *store.Task, md store.MailDomain) error {
	domain, now := md.Domain, md.CreatedAt
	steps := []TaskStep{{Name: StepDKIMKey, State: "pending"}, {Name: StepMailRecord, State: "pending"}, {Name: StepMailVerify, State: "pending"}}
	won, err := tx.Mail().ClaimDomain(ctx, md)
	if err != nil {
		return err
	}
	if !won {
		return errMailClaimed
	}
	c, err := s.quotes.Consume(ctx, tx, p, q.ProjectID, q.ID)
	if err != nil {
		return err
	}
	m := s.mutated("setup_email", []Cost{{Item: "email:" + domain, Amount: c.AmountMicro}},
		[]Resource{{Type: "mail_domain", ID: domain}}, reverse("remove_email", map[string]any{"domain": domain}), c.RemainingMicro)
	pl := mailPayload{Domain: domain, ProjectID: q.ProjectID, QuoteID: q.ID, ChargedMicro: c.AmountMicro, Receipt: &m.Receipt, Undo: &m.Undo}
	sj, _ := json.Marshal(steps)
	pj, _ := json.Marshal(pl)
	task.Steps, task.Payload = string(sj), string(pj)
	if err := tx.Tasks().Insert(ctx, *task); err != nil {
		return err
	}
	_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "setup_email", ObjectType: "domain", ObjectID: domain,
		Details: map[string]any{"taskId": task.ID, "quoteId": q.ID, "amountMicroUsd": c.AmountMicro}}, now)
	return err
}

// errMailClaimed is a setup that lost the claim on the domain's mail.
var errMailClaimed = errors.New("mail for the domain is set up or being set up")

// setupUnderWay answers the task of the organisation's mail set-up on
// domain when there is one that has not failed: set_up or being set up.
func (s *Mail) setupUnderWay(ctx context.Context, p *auth.Principal, domain string) (*Task, bool) {
	d, err := s.store.Mail().Domain(ctx, domain)
	if err != nil || MailState(d.State) == MailRemoved || d.OrgID != p.OrgID {
		return nil, false
	}
	view, err := s.tasks.Get(ctx, p.OrgID, d.TaskID)
	if err != nil || view.State == TaskFailed || view.State == TaskCanceled {
		return nil, false
	}
	return view, true
}

// newDKIMKey makes a domain's signing key: the private key as PKCS #8
// PEM, kept on the server, and the public key as DNS publishes it.
func newDKIMKey() (private, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), base64.StdEncoding.EncodeToString(pub), nil
}

// runSetup works an email setup task.
func (s *Mail) runSetup(ctx context.Context, t store.Task) error {
	var pl mailPayload
	rt, err := s.loadRunning(t, &pl)
	if err != nil {
		return err
	}
	var d store.MailDomain
	err = rt.do(ctx, &pl, StepDKIMKey, func() (string, error) {
		// Setup claimed the domain with its key; a task queued before
		// setups claimed makes the key here.
		privateKey, publicKey, err := newDKIMKey()
		if err != nil {
			return "", err
		}
		now := s.Now().UTC()
		d, err = s.store.Mail().PutDomain(ctx, store.MailDomain{Domain: pl.Domain, OrgID: t.OrgID, Selector: DKIMSelector,
			PrivateKey: privateKey, PublicKey: publicKey, State: "setting_up", TaskID: t.ID, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			return "", err
		}
		if d.TaskID != t.ID || MailState(d.State) == MailRemoved {
			if err := s.store.Mail().SetDomainState(ctx, pl.Domain, "setting_up", t.ID, now); err != nil {
				return "", err
			}
		}
		return "ed25519 key " + d.Selector + "._domainkey." + pl.Domain + " (the private key stays on the server)", nil
	})
	if err == nil {
		if d.Domain == "" {
			d, err = s.store.Mail().Domain(ctx, pl.Domain)
		}
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepMailRecord, func() (string, error) {
			n, err := s.writeMailRecords(ctx, t.OrgID, pl.Domain, d.PublicKey)
			return fmt.Sprintf("MX, SPF, DMARC and DKIM records in %s's zone (%d records)", pl.Domain, n), err
		})
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepMailVerify, func() (string, error) {
			checks := []struct{ name, typ, want string }{
				{pl.Domain, "MX", MailHost(pl.Domain)},
				{pl.Domain, "TXT", "v=spf1"},
				{"_dmarc." + pl.Domain, "TXT", "v=DMARC1"},
				{DKIMSelector + "._domainkey." + pl.Domain, "TXT", d.PublicKey},
			}
			for _, c := range checks {
				if err := s.platform.VerifyDNS(ctx, c.name, c.typ, c.want); err != nil {
					return "", fmt.Errorf("%s %s not served yet: %w", c.name, c.typ, err)
				}
			}
			return "Pier's DNS answers MX, SPF, DMARC and DKIM", nil
		})
	}
	if err != nil {
		return err
	}
	now := s.Now().UTC()
	if err := s.store.Mail().SetDomainState(ctx, pl.Domain, "ready", t.ID, now); err != nil {
		return err
	}
	res, _ := json.Marshal(map[string]any{"domain": pl.Domain, "mx": MailHost(pl.Domain), "dkimSelector": DKIMSelector})
	rt.t.State, rt.t.Result = "succeeded", string(res)
	return rt.save(ctx, &pl)
}

// writeMailRecords puts the mail records into the domain's zone, making
// the zone when the domain has none.
func (s *Zones) writeMailRecords(ctx context.Context, orgID, domain, dkimPublic string) (int, error) {
	// A zone made for mail alone points no web name at the edge: those
	// come with a service (syncZone).
	recs, serial := slices.DeleteFunc(zone.BuildZone(domain, s.zone), isWebRecord), s.Now().Unix()
	if z, err := s.store.Domains().Zone(ctx, domain); err == nil {
		if recs, err = zone.DecodeRecords(z.Records); err != nil {
			return 0, err
		}
		serial = max(serial, z.Serial+1)
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	recs = slices.DeleteFunc(recs, isMailRecord)
	if dkimPublic != "" {
		recs = append(recs, mailRecords(domain, s.zone, dkimPublic)...)
	}
	if err := s.store.Domains().PutZone(ctx, store.Zone{Domain: domain, OrgID: orgID, Serial: serial, Records: zone.EncodeRecords(recs), UpdatedAt: s.Now()}); err != nil {
		return 0, err
	}
	s.platform.InvalidateZone(domain)
	return len(recs), nil
}

// MailRemoval is a domain whose mail records remove_email took out, and
// what is left of the budget of the organisation's first project.
type MailRemoval struct {
	Domain          string
	BudgetRemaining money.MicroUSD
}

// Remove takes a domain's mail records out of its zone: setup_email's
// undo. Addresses and messages stay; mail to the domain is refused.
func (s *Mail) Remove(ctx context.Context, p *auth.Principal, domain string) (*MailRemoval, error) {
	domain = strings.ToLower(domain)
	d, err := s.store.Mail().Domain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && d.OrgID != p.OrgID {
		return nil, apierr.Newf("mail:not_set_up", "%s has no mail set up in your organisation", domain)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.writeMailRecords(ctx, p.OrgID, domain, ""); err != nil {
		return nil, err
	}
	now := s.Now().UTC()
	if err := s.store.Mail().SetDomainState(ctx, domain, string(MailRemoved), d.TaskID, now); err != nil {
		return nil, err
	}
	if _, err := s.store.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "remove_email", ObjectType: "domain", ObjectID: domain}, now); err != nil {
		return nil, err
	}
	proj := ""
	if ps, err := s.store.Projects().List(ctx, p.OrgID); err == nil && len(ps) > 0 {
		proj = ps[0].ID
	}
	var left money.MicroUSD
	if proj != "" {
		if st, err := s.projects.State(ctx, p, proj); err == nil {
			left = st.RemainingMicro
		}
	}
	return &MailRemoval{Domain: domain, BudgetRemaining: left}, nil
}

// waiters wake wait_for_message the moment a message lands in an inbox.
type waiters struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (w *waiters) wait(inbox string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = map[string]chan struct{}{}
	}
	c, ok := w.ch[inbox]
	if !ok {
		c = make(chan struct{})
		w.ch[inbox] = c
	}
	return c
}

func (w *waiters) wake(inbox string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.ch[inbox]; ok {
		close(c)
		delete(w.ch, inbox)
	}
}

// normAddress lowers an address and checks its form.
func normAddress(a string) (local, domain string, err error) {
	addr, err := mail.ParseAddress(a)
	if err != nil || addr.Name != "" {
		return "", "", fmt.Errorf("%q is not a bare email address", a)
	}
	local, domain, _ = strings.Cut(strings.ToLower(addr.Address), "@")
	return local, domain, nil
}
