package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
)

// Onboarding: signup and card flows. The agent's side lives here; the human's
// side (review, card page) is on the human pages, which no agent key reaches.

func (o onboardingRoutes) CreateSignup(ctx context.Context, req api.CreateSignupRequestObject) (api.CreateSignupResponseObject, error) {
	var body models.SignupRequest
	if req.Body != nil {
		body = *req.Body
	}
	su, next, err := o.svc.Onboarding.StartSignup(ctx, auth.FromContext(ctx).Caller, body)
	if err != nil {
		return nil, err
	}
	return api.CreateSignup201JSONResponse{Data: *su, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o onboardingRoutes) PollSignup(ctx context.Context, req api.PollSignupRequestObject) (api.PollSignupResponseObject, error) {
	res, next, err := o.svc.Onboarding.PollSignup(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return api.PollSignup200JSONResponse{Data: *res, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o onboardingRoutes) CreateBillingSetupLink(ctx context.Context, req api.CreateBillingSetupLinkRequestObject) (api.CreateBillingSetupLinkResponseObject, error) {
	var body models.BillingSetupLinkRequest
	if req.Body != nil {
		body = *req.Body
	}
	link, next, err := o.svc.Onboarding.CreateBillingSetupLink(ctx, auth.FromContext(ctx), body)
	if err != nil {
		return nil, err
	}
	return api.CreateBillingSetupLink201JSONResponse{Data: *link, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o onboardingRoutes) PollBilling(ctx context.Context, req api.PollBillingRequestObject) (api.PollBillingResponseObject, error) {
	res, next, err := o.svc.Onboarding.PollBilling(ctx, auth.FromContext(ctx), *req.Body)
	if err != nil {
		return nil, err
	}
	return api.PollBilling200JSONResponse{Data: *res, Actions: next, FormatVersion: FormatVersion}, nil
}
