package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

func addressView(a store.EmailAddress) models.EmailAddress {
	v := models.EmailAddress{Id: a.ID, Address: a.Address, Domain: a.Domain, InboxId: a.InboxID, CatchAll: a.CatchAll, CreatedAt: a.CreatedAt}
	if a.DeletedAt != nil {
		v.Deleted = ptr(true)
	}
	return v
}

// CreateAddress adds an address, with its own inbox, on a domain whose
// mail is set up.
func (s *Mail) CreateAddress(ctx context.Context, p *auth.Principal, req models.EmailAddressRequest) (*models.EmailAddressChange, []models.Action, error) {
	raw := string(req.Address)
	catchAll := req.CatchAll != nil && *req.CatchAll
	local, domain, err := normAddress(raw)
	if err != nil {
		return nil, nil, apierr.Newf("input:invalid", "%v", err).WithDetails(models.FieldProblem{Field: "body.address", Problem: "not an address"})
	}
	d, err := s.store.Mail().Domain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && (d.OrgID != p.OrgID || MailState(d.State) == MailRemoved) {
		return nil, nil, apierr.Newf("mail:not_set_up", "%s has no mail set up in your organisation", domain).
			WithActions(s.quoteMailAction(ctx, p.OrgID, domain))
	}
	if err != nil {
		return nil, nil, err
	}
	if MailState(d.State) != MailReady {
		// Being set up: addresses come once Pier's DNS answers its records.
		return nil, nil, apierr.Newf("mail:not_set_up", "mail for %s is still being set up; create the address once its setup task has succeeded", domain).
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
		return nil, nil, apierr.Newf("conflict:state", "%s is already an address", a.Address).WithActions(actions.Tool("list_email_addresses", "agent", nil))
	} else if err != nil {
		return nil, nil, err
	}
	v, err := addressChange(ctx, s, "create_email_address", a, UndoCall("delete_email_address", map[string]any{"id": a.ID}))
	if err != nil {
		return nil, nil, err
	}
	return v, []models.Action{
		actions.Tool("wait_for_message", "agent", map[string]any{"id": a.InboxID}),
		actions.Tool("delete_email_address", "agent", map[string]any{"id": a.ID}),
	}, nil
}

// quoteMailAction is the create_quote that prices mail for domain, in the
// organisation's first project; without one, projectId is listed as
// missing.
func (s *Mail) quoteMailAction(ctx context.Context, orgID, domain string) models.Action {
	args := map[string]any{"items": []any{map[string]any{"kind": "email", "domain": domain}}}
	if ps, err := s.store.Projects().List(ctx, orgID); err == nil && len(ps) > 0 {
		args["projectId"] = ps[0].ID
	}
	return actions.Tool("create_quote", "agent", args)
}

// Addresses lists a page of the organisation's addresses, oldest first.
func (s *Mail) Addresses(ctx context.Context, orgID string, f store.Filter) (*models.EmailAddressList, []models.Action, error) {
	f = mailPage(f)
	l, err := s.store.Mail().Addresses(ctx, orgID, f)
	if err != nil {
		return nil, nil, err
	}
	out := &models.EmailAddressList{Addresses: []models.EmailAddress{}}
	for _, a := range l {
		out.Addresses = append(out.Addresses, addressView(a))
	}
	if len(l) > 0 {
		last := l[len(l)-1]
		out.NextCursor = nextCursor(f, len(l), last.CreatedAt, last.ID)
	}
	return out, actions.Page("list_email_addresses", out.NextCursor, f.Args()), nil
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
func (s *Mail) DeleteAddress(ctx context.Context, p *auth.Principal, id string) (*models.EmailAddressChange, []models.Action, error) {
	a, err := s.store.Mail().Address(ctx, p.OrgID, id)
	if err == nil && a.DeletedAt == nil {
		err = s.store.Mail().DeleteAddress(ctx, p.OrgID, id, s.Now())
		a, _ = s.store.Mail().Address(ctx, p.OrgID, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no email address %s in your organisation", id)
	}
	if err != nil {
		return nil, nil, err
	}
	// Creating the address again takes mail again, into the same inbox.
	v, err := addressChange(ctx, s, "delete_email_address", a, UndoCall("create_email_address",
		map[string]any{"address": a.Address, "catchAll": a.CatchAll}))
	if err != nil {
		return nil, nil, err
	}
	return v, []models.Action{actions.Stop("done")}, nil
}

// Inboxes lists a page of the organisation's inboxes, oldest first.
func (s *Mail) Inboxes(ctx context.Context, orgID string, f store.Filter) (*models.InboxList, []models.Action, error) {
	f = mailPage(f)
	l, err := s.store.Mail().Inboxes(ctx, orgID, f)
	if err != nil {
		return nil, nil, err
	}
	out := &models.InboxList{Inboxes: []models.Inbox{}}
	for _, i := range l {
		out.Inboxes = append(out.Inboxes, models.Inbox{Id: i.ID, Address: i.Address, Messages: i.Messages, BytesUsed: i.BytesUsed, BytesLimit: i.BytesLimit})
	}
	var first []models.Action
	if len(l) > 0 {
		last := l[len(l)-1]
		out.NextCursor = nextCursor(f, len(l), last.CreatedAt, last.ID)
		first = append(first, actions.Tool("list_messages", "agent", map[string]any{"id": l[0].ID}))
	}
	return out, actions.Page("list_inboxes", out.NextCursor, f.Args(), first...), nil
}

func summaryView(m store.Message) models.MessageSummary {
	var to []string
	json.Unmarshal([]byte(m.Rcpt), &to)
	if to == nil {
		to = []string{}
	}
	return models.MessageSummary{Id: m.ID, InboxId: m.InboxID, From: m.FromHeader, To: to, Subject: m.Subject, ReceivedAt: m.ReceivedAt, Size: int(m.Size)}
}

func messageView(m store.Message) models.Message {
	sv := summaryView(m)
	v := models.Message{Id: m.ID, InboxId: m.InboxID, From: sv.From, To: sv.To, Subject: m.Subject, ReceivedAt: m.ReceivedAt, Size: sv.Size, Text: m.Text,
		Headers: map[string][]string{}, Attachments: []models.Attachment{}}
	json.Unmarshal([]byte(m.Headers), &v.Headers)
	json.Unmarshal([]byte(m.Attachments), &v.Attachments)
	json.Unmarshal([]byte(m.Auth), &v.Auth)
	if m.HTML != "" {
		v.Html = ptr(m.HTML)
	}
	return v
}

func (s *Mail) inbox(ctx context.Context, orgID, id string) error {
	_, err := s.store.Mail().Inbox(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return apierr.Newf("not_found:resource", "no inbox %s in your organisation", id)
	}
	return err
}

// Messages lists an inbox's messages, newest first.
func (s *Mail) Messages(ctx context.Context, orgID, inboxID string, f store.MessageFilter) (*models.MessageList, []models.Action, error) {
	if err := s.inbox(ctx, orgID, inboxID); err != nil {
		return nil, nil, err
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	l, err := s.store.Mail().Messages(ctx, orgID, inboxID, f)
	if err != nil {
		return nil, nil, err
	}
	out := &models.MessageList{Messages: []models.MessageSummary{}}
	for _, m := range l {
		out.Messages = append(out.Messages, summaryView(m))
	}
	next := []models.Action{}
	if len(l) == f.Limit {
		last := l[len(l)-1].ID
		out.NextBefore = &last
		next = append(next, actions.Tool("list_messages", "agent", messagePageArgs(inboxID, f, last)))
	}
	return out, append(next, actions.Stop("done")), nil
}

// messagePageArgs are list_messages' arguments for the page after the
// message before: the same inbox, filters and page size.
func messagePageArgs(inboxID string, f store.MessageFilter, before string) map[string]any {
	args := map[string]any{"id": inboxID, "before": before, "limit": f.Limit}
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
func (s *Mail) Message(ctx context.Context, orgID, id string) (*models.Message, []models.Action, error) {
	m, err := s.store.Mail().Message(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no message %s in your organisation", id)
	}
	if err != nil {
		return nil, nil, err
	}
	v := messageView(m)
	return &v, []models.Action{actions.Tool("delete_message", "agent", map[string]any{"id": id})}, nil
}

// DeleteMessage deletes a message and gives its bytes back to the inbox.
func (s *Mail) DeleteMessage(ctx context.Context, orgID, id string) (*models.MessageDeletion, []models.Action, error) {
	m, err := s.store.Mail().DeleteMessage(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no message %s in your organisation", id)
	}
	if err != nil {
		return nil, nil, err
	}
	address := ""
	if in, err := s.store.Mail().Inbox(ctx, orgID, m.InboxID); err == nil {
		address = in.Address
	}
	left, err := mailBudget(ctx, s.store, orgID, address)
	if err != nil {
		return nil, nil, err
	}
	// A deleted message is gone: nothing brings it back.
	mu := s.Mutation("delete_message", nil, nil, nil, left)
	return &models.MessageDeletion{Id: m.ID, InboxId: m.InboxID, Deleted: true, Receipt: mu.Receipt, Undo: mu.Undo,
		BudgetRemainingUsd: mu.BudgetRemainingUsd}, []models.Action{actions.Stop("done")}, nil
}

// WaitForMessage answers the oldest message in the inbox that matches and
// arrived at or after `since` (any time when `since` is not given), as soon
// as there is one, or mail:no_message at the deadline. Oldest, because a
// verification flow that waits from the moment it asked wants the first
// answer to that request, not a later one.
func (s *Mail) WaitForMessage(ctx context.Context, orgID, inboxID string, req models.WaitForMessageRequest) (*models.Message, []models.Action, error) {
	if err := s.inbox(ctx, orgID, inboxID); err != nil {
		return nil, nil, err
	}
	timeout := 30 * time.Second
	if req.TimeoutSeconds != nil {
		timeout = time.Duration(*req.TimeoutSeconds) * time.Second
	}
	f := store.MessageFilter{Limit: 1, Oldest: true}
	if req.From != nil {
		f.From = *req.From
	}
	if req.Subject != nil {
		f.Subject = *req.Subject
	}
	if req.Since != nil {
		f.Since = *req.Since
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		// Take the channel before looking, so a delivery in between wakes us.
		woken := s.mailWaiters.wait(inboxID)
		l, err := s.store.Mail().Messages(ctx, orgID, inboxID, f)
		if err != nil {
			return nil, nil, err
		}
		if len(l) > 0 {
			v := messageView(l[0])
			return &v, []models.Action{actions.Tool("get_message", "agent", map[string]any{"id": l[0].ID})}, nil
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
			return nil, nil, apierr.Newf("mail:no_message", "no matching message arrived in %s", timeout).
				WithActions(actions.Tool("wait_for_message", "agent", args))
		case <-ctx.Done():
			return nil, nil, ctx.Err()
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
	atts := []models.Attachment{}
	for _, at := range d.Attachments {
		sum, err := s.putBlob(ctx, at.Data, now)
		if err != nil {
			return "", err
		}
		atts = append(atts, models.Attachment{Filename: at.Filename, ContentType: at.ContentType, Size: len(at.Data), Sha256: sum})
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
