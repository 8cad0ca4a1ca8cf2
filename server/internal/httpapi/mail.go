package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

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
	m := o.svc.Mutation("remove_email", nil, nil, nil, r.BudgetRemaining)
	removal := models.MailRemoval{Domain: r.Domain, State: string(service.MailRemoved), Receipt: m.Receipt, Undo: m.Undo,
		BudgetRemainingUsd: m.BudgetRemainingUsd}
	return api.RemoveEmail200JSONResponse{Data: removal, Actions: []models.Action{actions.Stop("done")}, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) CreateEmailAddress(ctx context.Context, req api.CreateEmailAddressRequestObject) (api.CreateEmailAddressResponseObject, error) {
	a, next, err := o.svc.Mail.CreateAddress(ctx, auth.FromContext(ctx), models.EmailAddressRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.CreateEmailAddress201JSONResponse{Data: *a, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) ListEmailAddresses(ctx context.Context, req api.ListEmailAddressesRequestObject) (api.ListEmailAddressesResponseObject, error) {
	l, next, err := orgList(ctx, req.Params.Cursor, req.Params.Limit, o.svc.Mail.Addresses)
	if err != nil {
		return nil, err
	}
	return api.ListEmailAddresses200JSONResponse{Data: l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) DeleteEmailAddress(ctx context.Context, req api.DeleteEmailAddressRequestObject) (api.DeleteEmailAddressResponseObject, error) {
	a, next, err := o.svc.Mail.DeleteAddress(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.DeleteEmailAddress200JSONResponse{Data: *a, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) ListInboxes(ctx context.Context, req api.ListInboxesRequestObject) (api.ListInboxesResponseObject, error) {
	l, next, err := orgList(ctx, req.Params.Cursor, req.Params.Limit, o.svc.Mail.Inboxes)
	if err != nil {
		return nil, err
	}
	return api.ListInboxes200JSONResponse{Data: l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) ListMessages(ctx context.Context, req api.ListMessagesRequestObject) (api.ListMessagesResponseObject, error) {
	f := store.MessageFilter{From: deref(req.Params.From), Subject: deref(req.Params.Subject), Before: deref(req.Params.Before), Limit: val(req.Params.Limit)}
	if req.Params.Since != nil {
		f.Since = *req.Params.Since
	}
	l, next, err := o.svc.Mail.Messages(ctx, auth.FromContext(ctx).OrgID, req.Id, f)
	if err != nil {
		return nil, err
	}
	return api.ListMessages200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) GetMessage(ctx context.Context, req api.GetMessageRequestObject) (api.GetMessageResponseObject, error) {
	m, next, err := o.svc.Mail.Message(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetMessage200JSONResponse{Data: *m, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) DeleteMessage(ctx context.Context, req api.DeleteMessageRequestObject) (api.DeleteMessageResponseObject, error) {
	m, next, err := o.svc.Mail.DeleteMessage(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.DeleteMessage200JSONResponse{Data: *m, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o mailRoutes) WaitForMessage(ctx context.Context, req api.WaitForMessageRequestObject) (api.WaitForMessageResponseObject, error) {
	var body models.WaitForMessageRequest
	if req.Body != nil {
		body = models.WaitForMessageRequest(*req.Body)
	}
	m, next, err := o.svc.Mail.WaitForMessage(ctx, auth.FromContext(ctx).OrgID, req.Id, body)
	if err != nil {
		return nil, err
	}
	return api.WaitForMessage200JSONResponse{Data: *m, Actions: next, FormatVersion: FormatVersion}, nil
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
	m := o.svc.Mutation("send_message", nil, []models.ResourceRef{{Type: "message", Id: sent.ID}}, nil, sent.BudgetRemaining)
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
