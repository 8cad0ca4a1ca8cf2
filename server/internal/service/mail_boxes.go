package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

// EmailAddress is an address that takes mail into its own inbox; a
// catch-all's is *@domain. Deleted says it takes mail no more.
type EmailAddress struct {
	ID, Address, Domain, InboxID string
	CatchAll, Deleted            bool
	CreatedAt                    time.Time
}

// AddressChange is an address as created or deleted, with the mutation's
// receipt, how to undo it and the budget that remains.
type AddressChange struct {
	EmailAddress
	Mutated
}

// Inbox is where an address's mail is kept, and how full it is.
type Inbox struct {
	ID, Address           string
	Messages              int
	BytesUsed, BytesLimit int64
}

// MessageSummary is what a list shows of a received message.
type MessageSummary struct {
	ID, InboxID, From, Subject string
	To                         []string
	ReceivedAt                 time.Time
	Size                       int
}

// Message is a received message in full.
type Message struct {
	MessageSummary
	Headers     map[string][]string
	Text, HTML  string
	Attachments []StoredAttachment
	Auth        AuthResults
}

// StoredAttachment is an attached file as a message keeps it: its blob
// by content. It is kept with the message in the contract's JSON shape.
type StoredAttachment struct {
	ContentType string `json:"contentType"`
	Filename    string `json:"filename"`
	SHA256      string `json:"sha256"`
	Size        int    `json:"size"`
}

// MessagePage is a page of an inbox's messages, newest first.
// NextBefore, on a full page, names the message the next page starts
// before; Args are list_messages' arguments for it, less that one.
type MessagePage struct {
	Messages   []MessageSummary
	NextBefore *string
	Args       map[string]any
}

// MessageDeletion is a deleted message and the mutation: nothing brings
// the message back.
type MessageDeletion struct {
	ID, InboxID string
	Mutated
}

// MessageWait is what WaitForMessage waits for: a message from and about
// what is given, received at or after Since. Timeout is how long to wait;
// nil waits 30 seconds.
type MessageWait struct {
	From, Subject string
	Since         time.Time
	Timeout       *time.Duration
}

func addressView(a store.EmailAddress) EmailAddress {
	return EmailAddress{ID: a.ID, Address: a.Address, Domain: a.Domain, InboxID: a.InboxID, CatchAll: a.CatchAll, CreatedAt: a.CreatedAt,
		Deleted: a.DeletedAt != nil}
}

// CreateAddress adds an address, with its own inbox, on a domain whose
// mail is set up. With catchAll, the address's domain alone names it.
func (s *Mail) CreateAddress(ctx context.Context, p *auth.Principal, address string, catchAll bool) (*AddressChange, error) {
	local, domain, err := normAddress(address)
	if err != nil {
		return nil, apierr.Newf("input:invalid", "%v", err).WithField("body.address", "not an address")
	}
	d, err := s.store.Mail().Domain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && (d.OrgID != p.OrgID || MailState(d.State) == MailRemoved) {
		return nil, apierr.Newf("mail:not_set_up", "%s has no mail set up in your organisation", domain).
			WithActions(actions.Tool("create_quote", "agent", s.quoteMailArgs(ctx, p.OrgID, domain)))
	}
	if err != nil {
		return nil, err
	}
	if MailState(d.State) != MailReady {
		// Being set up: addresses come once Pier's DNS answers its records.
		return nil, apierr.Newf("mail:not_set_up", "mail for %s is still being set up; create the address once its setup task has succeeded", domain).
			WithActions(actions.Retry("get_task", "agent", map[string]any{"id": d.TaskID}, 2))
	}
	a := store.EmailAddress{ID: auth.ID("adr"), OrgID: p.OrgID, Domain: domain, Address: local + "@" + domain, InboxID: auth.ID("inb"), CatchAll: catchAll, CreatedAt: s.Now().UTC()}
	if catchAll {
		a.Address = "*@" + domain
	}
	limit := s.inboxBytes
	if limit <= 0 {
		limit = DefaultInboxBytes
	}
	if err := s.store.Mail().CreateAddress(ctx, a, limit); errors.Is(err, store.ErrConflict) {
		return nil, apierr.Newf("conflict:state", "%s is already an address", a.Address).WithActions(actions.Tool("list_email_addresses", "agent", nil))
	} else if err != nil {
		return nil, err
	}
	return addressChange(ctx, s, "create_email_address", a, reverse("delete_email_address", map[string]any{"id": a.ID}))
}

// quoteMailArgs are the arguments of the create_quote that prices mail for
// domain, in the organisation's first project; without one, projectId is
// left out for the caller to give.
func (s *Mail) quoteMailArgs(ctx context.Context, orgID, domain string) map[string]any {
	args := map[string]any{"items": []any{map[string]any{"kind": "email", "domain": domain}}}
	if ps, err := s.store.Projects().List(ctx, orgID); err == nil && len(ps) > 0 {
		args["projectId"] = ps[0].ID
	}
	return args
}

// Addresses lists a page of the organisation's addresses, oldest first.
func (s *Mail) Addresses(ctx context.Context, orgID string, f store.Filter) (*Page[EmailAddress], error) {
	f = mailPage(f)
	l, err := s.store.Mail().Addresses(ctx, orgID, f)
	if err != nil {
		return nil, err
	}
	out := &Page[EmailAddress]{Items: []EmailAddress{}, Args: f.Args()}
	for _, a := range l {
		out.Items = append(out.Items, addressView(a))
	}
	if len(l) > 0 {
		last := l[len(l)-1]
		out.NextCursor = nextCursor(f, len(l), last.CreatedAt, last.ID)
	}
	return out, nil
}

// mailPage is a mail list's filter: the contract's page of 50 when the
// caller names none.
func mailPage(f store.Filter) store.Filter {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	return f
}

// DeleteAddress stops an address taking mail; its inbox stays.
func (s *Mail) DeleteAddress(ctx context.Context, p *auth.Principal, id string) (*AddressChange, error) {
	a, err := s.store.Mail().Address(ctx, p.OrgID, id)
	if err == nil && a.DeletedAt == nil {
		err = s.store.Mail().DeleteAddress(ctx, p.OrgID, id, s.Now())
		a, _ = s.store.Mail().Address(ctx, p.OrgID, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, notInOrg("email address", id, "list_email_addresses")
	}
	if err != nil {
		return nil, err
	}
	// Creating the address again takes mail again, into the same inbox.
	return addressChange(ctx, s, "delete_email_address", a, reverse("create_email_address",
		map[string]any{"address": a.Address, "catchAll": a.CatchAll}))
}

// Inboxes lists a page of the organisation's inboxes, oldest first.
func (s *Mail) Inboxes(ctx context.Context, orgID string, f store.Filter) (*Page[Inbox], error) {
	f = mailPage(f)
	l, err := s.store.Mail().Inboxes(ctx, orgID, f)
	if err != nil {
		return nil, err
	}
	out := &Page[Inbox]{Items: []Inbox{}, Args: f.Args()}
	for _, i := range l {
		out.Items = append(out.Items, Inbox{ID: i.ID, Address: i.Address, Messages: i.Messages, BytesUsed: i.BytesUsed, BytesLimit: i.BytesLimit})
	}
	if len(l) > 0 {
		last := l[len(l)-1]
		out.NextCursor = nextCursor(f, len(l), last.CreatedAt, last.ID)
	}
	return out, nil
}

func summaryView(m store.Message) MessageSummary {
	var to []string
	json.Unmarshal([]byte(m.Rcpt), &to)
	if to == nil {
		to = []string{}
	}
	return MessageSummary{ID: m.ID, InboxID: m.InboxID, From: m.FromHeader, To: to, Subject: m.Subject, ReceivedAt: m.ReceivedAt, Size: int(m.Size)}
}

func messageView(m store.Message) Message {
	v := Message{MessageSummary: summaryView(m), Text: m.Text, HTML: m.HTML, Headers: map[string][]string{}, Attachments: []StoredAttachment{}}
	json.Unmarshal([]byte(m.Headers), &v.Headers)
	json.Unmarshal([]byte(m.Attachments), &v.Attachments)
	json.Unmarshal([]byte(m.Auth), &v.Auth)
	return v
}

func (s *Mail) inbox(ctx context.Context, orgID, id string) error {
	_, err := s.store.Mail().Inbox(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return notInOrg("inbox", id, "list_inboxes")
	}
	return err
}

// Messages lists an inbox's messages, newest first.
func (s *Mail) Messages(ctx context.Context, orgID, inboxID string, f store.MessageFilter) (*MessagePage, error) {
	if err := s.inbox(ctx, orgID, inboxID); err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	l, err := s.store.Mail().Messages(ctx, orgID, inboxID, f)
	if err != nil {
		return nil, err
	}
	out := &MessagePage{Messages: []MessageSummary{}, Args: messagePageArgs(inboxID, f)}
	for _, m := range l {
		out.Messages = append(out.Messages, summaryView(m))
	}
	if len(l) == f.Limit {
		last := l[len(l)-1].ID
		out.NextBefore = &last
	}
	return out, nil
}

// messagePageArgs are list_messages' arguments for the page after this
// one, but for the message it starts before: the same inbox, filters and
// page size.
func messagePageArgs(inboxID string, f store.MessageFilter) map[string]any {
	args := map[string]any{"id": inboxID, "limit": f.Limit}
	if f.From != "" {
		args["from"] = f.From
	}
	if f.Subject != "" {
		args["subject"] = f.Subject
	}
	if !f.Since.IsZero() {
		args["since"] = f.Since.Format(time.RFC3339Nano)
	}
	return args
}

// Message reads a message.
func (s *Mail) Message(ctx context.Context, orgID, id string) (*Message, error) {
	m, err := s.store.Mail().Message(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notInOrg("message", id, "list_inboxes")
	}
	if err != nil {
		return nil, err
	}
	v := messageView(m)
	return &v, nil
}

// DeleteMessage deletes a message and gives its bytes back to the inbox.
func (s *Mail) DeleteMessage(ctx context.Context, orgID, id string) (*MessageDeletion, error) {
	m, err := s.store.Mail().DeleteMessage(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notInOrg("message", id, "list_inboxes")
	}
	if err != nil {
		return nil, err
	}
	address := ""
	if in, err := s.store.Mail().Inbox(ctx, orgID, m.InboxID); err == nil {
		address = in.Address
	}
	left, err := mailBudget(ctx, s.store, orgID, address)
	if err != nil {
		return nil, err
	}
	// A deleted message is gone: nothing brings it back.
	return &MessageDeletion{ID: m.ID, InboxID: m.InboxID, Mutated: s.mutated("delete_message", nil, nil, nil, left)}, nil
}

// WaitForMessage answers the oldest message in the inbox that matches and
// arrived at or after `since` (any time when `since` is not given), as soon
// as there is one, or mail:no_message at the deadline. Oldest, because a
// verification flow that waits from the moment it asked wants the first
// answer to that request, not a later one.
func (s *Mail) WaitForMessage(ctx context.Context, orgID, inboxID string, w MessageWait) (*Message, error) {
	if err := s.inbox(ctx, orgID, inboxID); err != nil {
		return nil, err
	}
	timeout := 30 * time.Second
	if w.Timeout != nil {
		timeout = *w.Timeout
	}
	f := store.MessageFilter{Limit: 1, Oldest: true, From: w.From, Subject: w.Subject, Since: w.Since}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		// Take the channel before looking, so a delivery in between wakes us.
		woken := s.mailWaiters.wait(inboxID)
		l, err := s.store.Mail().Messages(ctx, orgID, inboxID, f)
		if err != nil {
			return nil, err
		}
		if len(l) > 0 {
			v := messageView(l[0])
			return &v, nil
		}
		select {
		case <-woken:
		case <-time.After(time.Second):
			// Another replica's delivery wakes nobody here; look again.
		case <-deadline.C:
			args := map[string]any{"id": inboxID}
			if f.Subject != "" {
				args["subject"] = f.Subject
			}
			if f.From != "" {
				args["from"] = f.From
			}
			return nil, apierr.Newf("mail:no_message", "no matching message arrived in %s", timeout).
				WithActions(actions.Tool("wait_for_message", "agent", args))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Accepts says whether mail for rcpt has somewhere to go: an address of
// its own or its domain's catch-all, on a domain whose mail is set up and
// ready (not still being set up, nor removed).
func (s *outbox) Accepts(ctx context.Context, rcpt string) (bool, error) {
	local, domain, err := normAddress(rcpt)
	if err != nil {
		return false, nil
	}
	d, err := s.store.Mail().Domain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && MailState(d.State) != MailReady {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = s.store.Mail().Route(ctx, local+"@"+domain, domain)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Fits says whether a message of size bytes fits in the inbox rcpt routes
// to, so the SMTP listener can refuse it before parsing it. Deliver still
// decides, atomically, when messages race for the last room.
func (s *outbox) Fits(ctx context.Context, rcpt string, size int64) (bool, error) {
	local, domain, err := normAddress(rcpt)
	if err != nil {
		return false, nil
	}
	a, err := s.store.Mail().Route(ctx, local+"@"+domain, domain)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	in, err := s.store.Mail().Inbox(ctx, a.OrgID, a.InboxID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return in.BytesUsed+size <= in.BytesLimit, nil
}

// Delivery is a received message as the SMTP listener parsed it.
type Delivery struct {
	MailFrom    string
	Rcpt        string
	FromHeader  string
	Subject     string
	Headers     map[string][]string
	Text, HTML  string
	Attachments []Attachment
	Auth        AuthResults
	Raw         []byte
}

// AuthResults is what the checks of a received message said: DKIM (and
// the domain whose signature passed), SPF and DMARC. It is kept with the
// message in the contract's JSON shape.
type AuthResults struct {
	DKIM       string `json:"dkim"`
	DKIMDomain string `json:"dkimDomain,omitempty"`
	DMARC      string `json:"dmarc"`
	SPF        string `json:"spf"`
}

// Attachment is one attached file.
type Attachment struct {
	Filename, ContentType string
	Data                  []byte
}

// ErrInboxFull is a delivery refused because the inbox is at its limit.
var ErrInboxFull = errors.New("the inbox is full")

// Deliver stores a message in the inbox rcpt routes to. Attachments and
// the raw message are kept as blobs, by content.
func (s *outbox) Deliver(ctx context.Context, d Delivery) (string, error) {
	local, domain, err := normAddress(d.Rcpt)
	if err != nil {
		return "", err
	}
	a, err := s.store.Mail().Route(ctx, local+"@"+domain, domain)
	if err != nil {
		return "", err
	}
	now := s.Now().UTC()
	rawSum, err := s.putBlob(ctx, d.Raw, now)
	if err != nil {
		return "", err
	}
	atts := []StoredAttachment{}
	for _, at := range d.Attachments {
		sum, err := s.putBlob(ctx, at.Data, now)
		if err != nil {
			return "", err
		}
		atts = append(atts, StoredAttachment{Filename: at.Filename, ContentType: at.ContentType, Size: len(at.Data), SHA256: sum})
	}
	hj, _ := json.Marshal(d.Headers)
	aj, _ := json.Marshal(atts)
	authj, _ := json.Marshal(d.Auth)
	rj, _ := json.Marshal([]string{strings.ToLower(d.Rcpt)})
	m := store.Message{ID: auth.ID("msg"), InboxID: a.InboxID, OrgID: a.OrgID, MailFrom: d.MailFrom, Rcpt: string(rj), FromHeader: d.FromHeader,
		Subject: d.Subject, ReceivedAt: now, Size: int64(len(d.Raw)), Headers: string(hj), Text: d.Text, HTML: d.HTML,
		Attachments: string(aj), Auth: string(authj), RawSHA256: rawSum}
	if err := s.store.Mail().Deliver(ctx, m); errors.Is(err, store.ErrBudget) {
		return "", ErrInboxFull
	} else if err != nil {
		return "", err
	}
	s.mailWaiters.wake(a.InboxID)
	return m.ID, nil
}
