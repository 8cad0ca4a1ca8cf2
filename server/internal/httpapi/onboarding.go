package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
)

// Onboarding: signup and card flows. The agent's side lives here; the human's
// side (review, card page) is on the human pages, which no agent key reaches.

func (o onboardingRoutes) CreateSignup(ctx context.Context, req api.CreateSignupRequestObject) (api.CreateSignupResponseObject, error) {
	var body service.SignupRequest
	if b := req.Body; b != nil {
		body = service.SignupRequest{Email: deref(b.Email), OrganizationName: deref(b.OrganizationName)}
	}
	su, err := o.svc.Onboarding.StartSignup(ctx, auth.FromContext(ctx).Caller, body)
	if err != nil {
		return nil, err
	}
	m := wireMutated(su.Mutated)
	out := models.Signup{ReviewUrl: su.ReviewURL, SignupSessionId: su.ID, ClaimSecret: su.ClaimSecret, ExpiresAt: su.ExpiresAt,
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	// The human reviews first; the agent polls after.
	review := models.UrlAction{Kind: models.Url, Id: ptr("review"), Actor: "human", Url: su.ReviewURL, Purpose: models.ReviewSignup}
	poll := signupPoll(su.ID, su.ClaimSecret)
	poll.After = &[]string{"review"}
	next := []models.Action{actions.Wrap(review), actions.Wrap(poll)}
	return api.CreateSignup201JSONResponse{Data: out, Actions: next, FormatVersion: FormatVersion}, nil
}

// signupPoll is the poll of a signup, at the pace the signup rate limit
// keeps up with.
func signupPoll(id, secret string) models.ToolAction {
	t := actions.ToolAction("poll_signup", "agent", map[string]any{"signupSessionId": id, "claimSecret": secret})
	t.RetryAfterSeconds = ptr(service.SignupPollSeconds)
	return t
}

func (o onboardingRoutes) PollSignup(ctx context.Context, req api.PollSignupRequestObject) (api.PollSignupResponseObject, error) {
	id, secret := req.Body.SignupSessionId, req.Body.ClaimSecret
	res, err := o.svc.Onboarding.PollSignup(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	out := models.SignupPollResult{State: models.SignupPollResultState(res.State)}
	if res.OrgID != "" {
		out.OrganizationId, out.ProjectId = ptr(res.OrgID), ptr(res.ProjectID)
	}
	if res.APIKey != "" {
		out.ApiKey = ptr(res.APIKey)
	}
	var next []models.Action
	switch res.State {
	case service.SignupPendingReview:
		next = []models.Action{actions.Manual("wait_for_human", "human"), actions.Wrap(signupPoll(id, secret))}
	case service.SignupExpired:
		next = []models.Action{actions.Tool("create_signup", "agent", nil)}
	case service.SignupPendingCard:
		next = []models.Action{actions.URL(res.CardURL, models.CardSetup, "human"), actions.Wrap(signupPoll(id, secret))}
	case service.SignupClaimed:
		next = []models.Action{actions.Tool("list_projects", "agent", nil), actions.Manual("create_key", "human")}
	default: // complete: the key is in this answer, and in no later one
		next = []models.Action{actions.Tool("get_project", "agent", map[string]any{"id": res.ProjectID}), actions.Stop("done")}
	}
	return api.PollSignup200JSONResponse{Data: out, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o onboardingRoutes) CreateBillingSetupLink(ctx context.Context, req api.CreateBillingSetupLinkRequestObject) (api.CreateBillingSetupLinkResponseObject, error) {
	var reason string
	if req.Body != nil {
		reason = deref(req.Body.Reason)
	}
	link, err := o.svc.Onboarding.CreateBillingSetupLink(ctx, auth.FromContext(ctx), reason)
	if err != nil {
		return nil, err
	}
	m := wireMutated(link.Mutated)
	out := models.BillingSetupLink{SetupUrl: link.URL, SetupSessionId: link.ID, PollSecret: link.PollSecret, ExpiresAt: link.ExpiresAt,
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	// The human adds the card first; the agent polls after.
	card := models.UrlAction{Kind: models.Url, Id: ptr("card"), Actor: "human", Url: link.URL, Purpose: models.CardSetup}
	poll := billingPoll(link.ID, link.PollSecret)
	poll.After = &[]string{"card"}
	return api.CreateBillingSetupLink201JSONResponse{Data: out, Actions: []models.Action{actions.Wrap(card), actions.Wrap(poll)}, FormatVersion: FormatVersion}, nil
}

// billingPoll is the poll of a card flow, at the signup poll's pace.
func billingPoll(id, secret string) models.ToolAction {
	t := actions.ToolAction("poll_billing", "agent", map[string]any{"setupSessionId": id, "pollSecret": secret})
	t.RetryAfterSeconds = ptr(service.SignupPollSeconds)
	return t
}

func (o onboardingRoutes) PollBilling(ctx context.Context, req api.PollBillingRequestObject) (api.PollBillingResponseObject, error) {
	id, secret := req.Body.SetupSessionId, req.Body.PollSecret
	res, err := o.svc.Onboarding.PollBilling(ctx, auth.FromContext(ctx), id, secret)
	if err != nil {
		return nil, err
	}
	var next []models.Action
	switch res.State {
	case service.BillingComplete:
		next = []models.Action{actions.Stop("done")}
	case service.BillingExpired:
		next = []models.Action{actions.Tool("create_billing_setup_link", "agent", nil)}
	default: // open: the human adds a card while the agent polls
		next = []models.Action{actions.URL(res.CardURL, models.CardSetup, "human"), actions.Wrap(billingPoll(id, secret))}
	}
	out := models.BillingPollResult{State: models.BillingPollResultState(res.State)}
	return api.PollBilling200JSONResponse{Data: out, Actions: next, FormatVersion: FormatVersion}, nil
}
