package httpapi

import (
	"context"

	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
)

func (o taskRoutes) ListTasks(ctx context.Context, req api.ListTasksRequestObject) (api.ListTasksResponseObject, error) {
	f, err := page(req.Params.Cursor, req.Params.Limit)
	if err != nil {
		return nil, err
	}
	f.State = deref(req.Params.State)
	l, next, err := o.svc.Tasks.List(ctx, auth.FromContext(ctx).OrgID, f)
	if err != nil {
		return nil, err
	}
	return api.ListTasks200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o taskRoutes) GetTask(ctx context.Context, req api.GetTaskRequestObject) (api.GetTaskResponseObject, error) {
	t, next, err := o.svc.Tasks.Get(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetTask200JSONResponse{Data: *t, Actions: next, FormatVersion: FormatVersion}, nil
}
