package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
)

// Workflows prepares and applies workflows (server/internal/workflow).
type Workflows interface {
	Prepare(ctx context.Context, p *auth.Principal, req models.WorkflowRequest) (*models.PreparedWorkflow, []models.Action, error)
	Get(ctx context.Context, p *auth.Principal, id string) (*models.PreparedWorkflow, []models.Action, error)
	Apply(ctx context.Context, p *auth.Principal, id string, req *models.ApplyWorkflowRequest) (*service.Task, bool, error)
	JWKS(ctx context.Context) ([]byte, error)
}

func (o workflowRoutes) workflows(op string) (Workflows, error) {
	if o.cfg.Workflows == nil {
		return nil, notImplemented(op)
	}
	return o.cfg.Workflows, nil
}

func (o workflowRoutes) PrepareWorkflow(ctx context.Context, req api.PrepareWorkflowRequestObject) (api.PrepareWorkflowResponseObject, error) {
	wf, err := o.workflows("prepare_workflow")
	if err != nil {
		return nil, err
	}
	w, next, err := wf.Prepare(ctx, auth.FromContext(ctx), models.WorkflowRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.PrepareWorkflow201JSONResponse{Data: *w, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o workflowRoutes) GetWorkflow(ctx context.Context, req api.GetWorkflowRequestObject) (api.GetWorkflowResponseObject, error) {
	wf, err := o.workflows("get_workflow")
	if err != nil {
		return nil, err
	}
	w, next, err := wf.Get(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetWorkflow200JSONResponse{Data: *w, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o workflowRoutes) ApplyWorkflow(ctx context.Context, req api.ApplyWorkflowRequestObject) (api.ApplyWorkflowResponseObject, error) {
	wf, err := o.workflows("apply_workflow")
	if err != nil {
		return nil, err
	}
	var body *models.ApplyWorkflowRequest
	if req.Body != nil {
		b := models.ApplyWorkflowRequest(*req.Body)
		body = &b
	}
	t, replayed, err := wf.Apply(ctx, auth.FromContext(ctx), req.Id, body)
	if err != nil {
		return nil, err
	}
	out := api.ApplyWorkflow202JSONResponse{Data: *TaskHandle(t), Actions: TaskActions(t), FormatVersion: FormatVersion}
	if replayed {
		out.Replayed = &replayed
	}
	return out, nil
}

func (o workflowRoutes) GetWorkflowJwks(ctx context.Context, _ api.GetWorkflowJwksRequestObject) (api.GetWorkflowJwksResponseObject, error) {
	wf, err := o.workflows("get_workflow_jwks")
	if err != nil {
		return nil, err
	}
	b, err := wf.JWKS(ctx)
	if err != nil {
		return nil, err
	}
	return jwksFile(b), nil
}

var errInvalidJWKS = errors.New("the workflow key set is not JSON")

// jwksFile writes the key set as published, byte for byte.
type jwksFile []byte

func (f jwksFile) VisitGetWorkflowJwksResponse(w http.ResponseWriter) error {
	if !json.Valid(f) {
		return errInvalidJWKS
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(f)
	return err
}
