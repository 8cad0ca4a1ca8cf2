package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

func (o mailRoutes) SetupEmail(ctx context.Context, req api.SetupEmailRequestObject) (api.SetupEmailResponseObject, error) {
	t, err := o.svc.Mail.Setup(ctx, auth.FromContext(ctx), string(req.Domain), req.Body.QuoteId)
	if err != nil {
		return nil, err
	}
	return api.SetupEmail202JSONResponse{Data: *TaskHandle(t), Actions: TaskActions(t), FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) RemoveEmail(ctx context.Context, req api.RemoveEmailRequestObject) (api.RemoveEmailResponseObject, error) {
	r, err := o.svc.Mail.Remove(ctx, auth.FromContext(ctx), string(req.Domain))
	if err != nil {
		return nil, err
	}
	m := mutation(o.svc.Now(), "remove_email", nil, nil, nil, r.BudgetRemaining)
	removal := models.MailRemoval{Domain: r.Domain, State: string(service.MailRemoved), Receipt: m.Receipt, Undo: m.Undo,
		BudgetRemainingUsd: m.BudgetRemainingUsd}
	return api.RemoveEmail200JSONResponse{Data: removal, Actions: []models.Action{actions.Stop("done")}, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) CreateEmailAddress(ctx context.Context, req api.CreateEmailAddressRequestObject) (api.CreateEmailAddressResponseObject, error) {
	a, err := o.svc.Mail.CreateAddress(ctx, auth.FromContext(ctx), string(req.Body.Address), val(req.Body.CatchAll))
	if err != nil {
		return nil, err
	}
	next := []models.Action{
		actions.Tool("wait_for_message", "agent", map[string]any{"id": a.InboxID}),
		actions.Tool("delete_email_address", "agent", map[string]any{"id": a.ID}),
	}
	return api.CreateEmailAddress201JSONResponse{Data: addressChange(a), Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) ListEmailAddresses(ctx context.Context, req api.ListEmailAddressesRequestObject) (api.ListEmailAddressesResponseObject, error) {
	l, err := listed(ctx, req.Params.Cursor, req.Params.Limit, nil, o.svc.Mail.Addresses, emailAddress, nil, "list_email_addresses", "")
	if err != nil {
		return nil, err
	}
	out := models.EmailAddressList{Addresses: l.Items, NextCursor: l.NextCursor}
	return api.ListEmailAddresses200JSONResponse{Data: out, Actions: l.Actions, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) DeleteEmailAddress(ctx context.Context, req api.DeleteEmailAddressRequestObject) (api.DeleteEmailAddressResponseObject, error) {
	a, err := o.svc.Mail.DeleteAddress(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.DeleteEmailAddress200JSONResponse{Data: addressChange(a), Actions: []models.Action{actions.Stop("done")}, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) ListInboxes(ctx context.Context, req api.ListInboxesRequestObject) (api.ListInboxesResponseObject, error) {
	l, err := listed(ctx, req.Params.Cursor, req.Params.Limit, nil, o.svc.Mail.Inboxes, inboxInfo,
		func(i service.Inbox) string { return i.ID }, "list_inboxes", "list_messages")
	if err != nil {
		return nil, err
	}
	out := models.InboxList{Inboxes: l.Items, NextCursor: l.NextCursor}
	return api.ListInboxes200JSONResponse{Data: out, Actions: l.Actions, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) ListMessages(ctx context.Context, req api.ListMessagesRequestObject) (api.ListMessagesResponseObject, error) {
	f := store.MessageFilter{From: deref(req.Params.From), Subject: deref(req.Params.Subject), Before: deref(req.Params.Before), Limit: val(req.Params.Limit)}
	if req.Params.Since != nil {
		f.Since = *req.Params.Since
	}
	l, err := o.svc.Mail.Messages(ctx, auth.FromContext(ctx).OrgID, req.Id, f)
	if err != nil {
		return nil, err
	}
	out := models.MessageList{Messages: make([]models.MessageSummary, 0, len(l.Messages)), NextBefore: l.NextBefore}
	for _, m := range l.Messages {
		out.Messages = append(out.Messages, messageSummary(m))
	}
	next := []models.Action{}
	if l.NextBefore != nil {
		args := map[string]any{"before": *l.NextBefore}
		for k, v := range l.Args {
			args[k] = v
		}
		next = append(next, actions.Tool("list_messages", "agent", args))
	}
	return api.ListMessages200JSONResponse{Data: out, Actions: append(next, actions.Stop("done")), FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) GetMessage(ctx context.Context, req api.GetMessageRequestObject) (api.GetMessageResponseObject, error) {
	m, err := o.svc.Mail.Message(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	next := []models.Action{actions.Tool("delete_message", "agent", map[string]any{"id": m.ID})}
	return api.GetMessage200JSONResponse{Data: message(m), Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) DeleteMessage(ctx context.Context, req api.DeleteMessageRequestObject) (api.DeleteMessageResponseObject, error) {
	d, err := o.svc.Mail.DeleteMessage(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	m := wireMutated(d.Mutated)
	out := models.MessageDeletion{Id: d.ID, InboxId: d.InboxID, Deleted: true, Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	return api.DeleteMessage200JSONResponse{Data: out, Actions: []models.Action{actions.Stop("done")}, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) WaitForMessage(ctx context.Context, req api.WaitForMessageRequestObject) (api.WaitForMessageResponseObject, error) {
	var w service.MessageWait
	if b := req.Body; b != nil {
		w = service.MessageWait{From: deref(b.From), Subject: deref(b.Subject), Since: val(b.Since)}
		if b.TimeoutSeconds != nil {
			w.Timeout = ptr(time.Duration(*b.TimeoutSeconds) * time.Second)
		}
	}
	m, err := o.svc.Mail.WaitForMessage(ctx, auth.FromContext(ctx).OrgID, req.Id, w)
	if err != nil {
		return nil, err
	}
	next := []models.Action{actions.Tool("get_message", "agent", map[string]any{"id": m.ID})}
	return api.WaitForMessage200JSONResponse{Data: message(m), Actions: next, FormatVersion: FormatVersion}, nil
}

// emailAddress is an address as the contract writes it.
func emailAddress(a service.EmailAddress) models.EmailAddress {
	v := models.EmailAddress{Id: a.ID, Address: a.Address, Domain: a.Domain, InboxId: a.InboxID, CatchAll: a.CatchAll, CreatedAt: a.CreatedAt}
	if a.Deleted {
		v.Deleted = ptr(true)
	}
	return v
}

// addressChange is an address as created or deleted, with its receipt,
// undo and the budget that remains.
func addressChange(c *service.AddressChange) models.EmailAddressChange {
	v, m := emailAddress(c.EmailAddress), wireMutated(c.Mutated)
	return models.EmailAddressChange{Id: v.Id, Address: v.Address, Domain: v.Domain, InboxId: v.InboxId, CatchAll: v.CatchAll,
		CreatedAt: v.CreatedAt, Deleted: v.Deleted, Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
}

func inboxInfo(i service.Inbox) models.Inbox {
	return models.Inbox{Id: i.ID, Address: i.Address, Messages: i.Messages, BytesUsed: i.BytesUsed, BytesLimit: i.BytesLimit}
}

func messageSummary(m service.MessageSummary) models.MessageSummary {
	return models.MessageSummary{Id: m.ID, InboxId: m.InboxID, From: m.From, To: m.To, Subject: m.Subject, ReceivedAt: m.ReceivedAt, Size: m.Size}
}

// message is a received message in full, as the contract writes it.
func message(m *service.Message) models.Message {
	v := models.Message{Id: m.ID, InboxId: m.InboxID, From: m.From, To: m.To, Subject: m.Subject, ReceivedAt: m.ReceivedAt, Size: m.Size, Text: m.Text,
		Headers: m.Headers, Attachments: make([]models.Attachment, 0, len(m.Attachments)),
		Auth: models.AuthResults{Dkim: m.Auth.DKIM, Dmarc: m.Auth.DMARC, Spf: m.Auth.SPF}}
	for _, a := range m.Attachments {
		v.Attachments = append(v.Attachments, models.Attachment{Filename: a.Filename, ContentType: a.ContentType, Size: a.Size, Sha256: a.SHA256})
	}
	if m.Auth.DKIMDomain != "" {
		v.Auth.DkimDomain = ptr(m.Auth.DKIMDomain)
	}
	if m.HTML != "" {
		v.Html = ptr(m.HTML)
	}
	return v
}

func (o mailRoutes) SendMessage(ctx context.Context, req api.SendMessageRequestObject) (api.SendMessageResponseObject, error) {
	b := req.Body
	send := service.SendRequest{From: string(b.From), Subject: b.Subject, Text: b.Text, To: make([]string, 0, len(b.To))}
	for _, t := range b.To {
		send.To = append(send.To, string(t))
	}
	sent, err := o.svc.Mail.Send(ctx, auth.FromContext(ctx), send)
	if err != nil {
		return nil, err
	}
	// Sent mail cannot be called back: the undo is irreversible.
	m := mutation(o.svc.Now(), "send_message", nil, []models.ResourceRef{{Type: "message", Id: sent.ID}}, nil, sent.BudgetRemaining)
	out := models.SentMessage{MessageId: sent.ID, From: sent.From, To: sent.To, Relay: sent.Relay, DkimSelector: sent.DKIMSelector,
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	return api.SendMessage202JSONResponse{Data: out, Actions: []models.Action{actions.Stop("done")}, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) SetRegistrantContact(ctx context.Context, req api.SetRegistrantContactRequestObject) (api.SetRegistrantContactResponseObject, error) {
	b := req.Body
	c := service.RegistrantContact{Name: b.Name, Email: string(b.Email), Country: b.Country, Organization: deref(b.Organization),
		Street: deref(b.Street), City: deref(b.City), State: deref(b.State), PostalCode: deref(b.PostalCode)}
	t, mailed, err := o.svc.Mail.SetRegistrant(ctx, auth.FromContext(ctx), string(req.Domain), c)
	if err != nil {
		return nil, err
	}
	next := TaskActions(t)
	if mailed && len(next) == 2 {
		// The link mailed to the address confirms too, beside the page.
		next = []models.Action{next[0], actions.Manual("confirm_email", "human"), next[1]}
	}
	return api.SetRegistrantContact202JSONResponse{Data: *TaskHandle(t), Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) GetRdapDomain(ctx context.Context, req api.GetRdapDomainRequestObject) (api.GetRdapDomainResponseObject, error) {
	d, err := o.svc.Mail.RDAP(ctx, string(req.Domain))
	if e := apierr.As(err); err != nil && e.Code.Namespace() == "not_found" {
		// RDAP clients read RFC 9083's error object; Pier's clients read
		// the envelope's members beside it.
		env := ErrorEnvelope(e, "get_rdap_domain")
		return api.GetRdapDomain404ApplicationRdapPlusJSONResponse{
			ErrorCode: http.StatusNotFound, Title: "Not Found", Description: []string{e.Message},
			RdapConformance: []string{"rdap_level_0"},
			BlockedBy:       env.BlockedBy, Code: env.Code, Message: env.Message, Retryable: env.Retryable,
			Actions: env.Actions, FormatVersion: env.FormatVersion,
		}, nil
	}
	if err != nil {
		return nil, err
	}
	return rdapAnswer(d), nil
}

// rdapAnswer is an RFC 9083 object, application/rdap+json.
type rdapAnswer map[string]any

func (a rdapAnswer) VisitGetRdapDomainResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/rdap+json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=60")
	w.WriteHeader(http.StatusOK)
	return json.NewEncoder(w).Encode(a)
}
