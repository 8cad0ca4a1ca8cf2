package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
)

func (o serviceRoutes) ListServices(ctx context.Context, req api.ListServicesRequestObject) (api.ListServicesResponseObject, error) {
	l, err := listed(ctx, req.Params.Cursor, req.Params.Limit, byProjectAndState(req.Params.ProjectId, req.Params.State), o.svc.Launches.ListServices, serviceInfo,
		func(v service.ServiceView) string { return v.ID }, "list_services", "get_service")
	if err != nil {
		return nil, err
	}
	return api.ListServices200JSONResponse{Data: models.ServiceList{Services: l.Items, NextCursor: l.NextCursor}, Actions: l.Actions, FormatVersion: FormatVersion}, nil
}

func (o serviceRoutes) GetService(ctx context.Context, req api.GetServiceRequestObject) (api.GetServiceResponseObject, error) {
	v, err := o.svc.Launches.GetService(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetService200JSONResponse{Data: serviceInfo(*v), Actions: serviceActions(v), FormatVersion: FormatVersion}, nil
}

func (o serviceRoutes) LaunchService(ctx context.Context, req api.LaunchServiceRequestObject) (api.LaunchServiceResponseObject, error) {
	t, err := o.svc.Launches.Launch(ctx, auth.FromContext(ctx), req.Id, launchRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.LaunchService202JSONResponse{Data: *TaskHandle(t), Actions: TaskActions(t), FormatVersion: FormatVersion}, nil
}

// launchRequest is the contract's launch request in the domain's terms:
// what is absent stays nil where the domain tells absent from empty (a
// process's command, variables, secrets, health check and add-ons).
func launchRequest(b models.LaunchRequest) service.LaunchRequest {
	out := service.LaunchRequest{Name: b.Name, Target: string(b.Target), BundleID: deref(b.BundleId), Domain: deref(b.Domain),
		Years: orZero(b.Years), QuoteID: deref(b.QuoteId), Run: b.Run}
	if b.Env != nil {
		out.Env = *b.Env
	}
	if b.Secrets != nil {
		out.Secrets = *b.Secrets
	}
	if hc := b.HealthCheck; hc != nil {
		out.HealthCheck = &service.HealthCheck{Path: deref(hc.Path), TimeoutSeconds: orZero(hc.TimeoutSeconds), GraceSeconds: orZero(hc.GraceSeconds)}
	}
	if b.Addons != nil {
		out.Addons = make([]string, 0, len(*b.Addons))
		for _, a := range *b.Addons {
			out.Addons = append(out.Addons, string(a))
		}
	}
	return out
}

func (o serviceRoutes) TeardownService(ctx context.Context, req api.TeardownServiceRequestObject) (api.TeardownServiceResponseObject, error) {
	t, replayed, err := o.svc.Launches.Teardown(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	resp := api.TeardownService202JSONResponse{Data: *TaskHandle(t), Actions: TaskActions(t), FormatVersion: FormatVersion}
	if replayed {
		// A teardown asked again points at the one under way, or is done.
		resp.Replayed, resp.Actions = &replayed, []models.Action{actions.Stop("done")}
		if t.State.Active() {
			resp.Actions = []models.Action{actions.Tool("get_task", "agent", map[string]any{"id": t.ID})}
		}
	}
	return resp, nil
}

func (o serviceRoutes) GetServiceLogs(ctx context.Context, req api.GetServiceLogsRequestObject) (api.GetServiceLogsResponseObject, error) {
	q := service.LogQuery{Tail: val(req.Params.Tail), After: val(req.Params.After), Version: val(req.Params.Version)}
	if req.Params.Since != nil {
		q.Since = *req.Params.Since
	}
	orgID := auth.FromContext(ctx).OrgID
	if r := requestFrom(ctx); val(req.Params.Follow) && r != nil && wantsNDJSON(r.Header.Get("Accept")) {
		// Read once now, so an unknown service is the usual typed error.
		first, err := o.svc.Runs.Logs(ctx, orgID, req.Id, q)
		if err != nil {
			return nil, err
		}
		return logStream{runs: o.svc.Runs, ctx: ctx, orgID: orgID, id: req.Id, q: q, first: first}, nil
	}
	if w := val(req.Params.WaitSeconds); w > 0 {
		q.Wait = time.Duration(w) * time.Second
	}
	l, err := o.svc.Runs.Logs(ctx, orgID, req.Id, q)
	if err != nil {
		return nil, err
	}
	next := []models.Action{actions.Tool("get_service_logs", "agent", map[string]any{"id": l.ServiceID, "after": l.NextAfter, "waitSeconds": 30}),
		actions.Tool("get_service", "agent", map[string]any{"id": l.ServiceID})}
	return api.GetServiceLogs200JSONResponse{Data: serviceLogs(l), Actions: next, FormatVersion: FormatVersion}, nil
}

// serviceLogs is the contract's view of a page of a service's lines.
func serviceLogs(l *service.ServiceLogs) models.ServiceLogs {
	out := models.ServiceLogs{ServiceId: l.ServiceID, Lines: make([]models.LogLine, 0, len(l.Lines)), NextAfter: l.NextAfter}
	for _, line := range l.Lines {
		out.Lines = append(out.Lines, logLine(line))
	}
	return out
}

// logLine is one line as the contract writes it.
func logLine(l service.LogLine) models.LogLine {
	return models.LogLine{Seq: l.Seq, At: l.At, Stream: models.LogLineStream(l.Stream), Version: ptr(l.Version), Text: l.Text}
}

// wantsNDJSON: the Accept header names application/x-ndjson itself.
func wantsNDJSON(accept string) bool { return strings.Contains(accept, "application/x-ndjson") }

// logStream follows a service's log as NDJSON: one LogLine per line,
// flushed as written, until the client goes, the service ends, or an hour
// passes (follow again with after to go on).
type logStream struct {
	runs  *service.Runs
	ctx   context.Context
	orgID string
	id    string
	q     service.LogQuery
	first *service.ServiceLogs
}

func (s logStream) VisitGetServiceLogsResponse(w http.ResponseWriter) error {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	deadline := time.Now().Add(time.Hour)
	write := func(l *service.ServiceLogs) error {
		rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		for _, line := range l.Lines {
			if err := enc.Encode(logLine(line)); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	if err := write(s.first); err != nil {
		return nil
	}
	after := s.first.NextAfter
	for time.Now().Before(deadline) {
		q := service.LogQuery{After: after, Version: s.q.Version, Tail: 1000, Wait: 15 * time.Second}
		if s.runs.Ended(s.ctx, s.orgID, s.id) {
			q.Wait = 0 // what is left, then the end
		}
		l, err := s.runs.Logs(s.ctx, s.orgID, s.id, q)
		if err != nil {
			return nil
		}
		if len(l.Lines) == 0 {
			if s.runs.Ended(s.ctx, s.orgID, s.id) {
				return nil
			}
			// Keep the connection known to be alive through proxies.
			rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := w.Write([]byte("\n")); err != nil || rc.Flush() != nil {
				return nil
			}
			continue
		}
		if err := write(l); err != nil {
			return nil
		}
		after = l.NextAfter
	}
	return nil
}

func (o serviceRoutes) ListServiceEnv(ctx context.Context, req api.ListServiceEnvRequestObject) (api.ListServiceEnvResponseObject, error) {
	e, err := o.svc.Runs.ListEnv(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	out := models.ServiceEnv{ServiceId: e.ServiceID, Variables: make([]models.EnvVar, 0, len(e.Variables))}
	if e.Version > 0 {
		out.Version = ptr(e.Version)
	}
	for _, v := range e.Variables {
		ev := models.EnvVar{Name: v.Name, Secret: v.Secret}
		if !v.Secret {
			ev.Value = ptr(v.Value)
		}
		out.Variables = append(out.Variables, ev)
	}
	next := []models.Action{actions.Tool("set_service_env", "agent", map[string]any{"id": e.ServiceID, "set": map[string]any{}}), actions.Stop("done")}
	return api.ListServiceEnv200JSONResponse{Data: out, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o serviceRoutes) SetServiceEnv(ctx context.Context, req api.SetServiceEnvRequestObject) (api.SetServiceEnvResponseObject, error) {
	b := req.Body
	change := service.EnvChange{Unset: orZero(b.Unset)}
	if b.Set != nil {
		change.Set = *b.Set
	}
	if b.Secrets != nil {
		change.Secrets = *b.Secrets
	}
	t, err := o.svc.Runs.SetEnv(ctx, auth.FromContext(ctx), req.Id, change)
	if err != nil {
		return nil, err
	}
	return api.SetServiceEnv202JSONResponse{Data: *TaskHandle(t), Actions: TaskActions(t), FormatVersion: FormatVersion}, nil
}

func (o serviceRoutes) RollbackService(ctx context.Context, req api.RollbackServiceRequestObject) (api.RollbackServiceResponseObject, error) {
	t, err := o.svc.Runs.Rollback(ctx, auth.FromContext(ctx), req.Id, req.Body.Version)
	if err != nil {
		return nil, err
	}
	return api.RollbackService202JSONResponse{Data: *TaskHandle(t), Actions: TaskActions(t), FormatVersion: FormatVersion}, nil
}
