package httpapi

import (
	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/service"
)

// serviceInfo is the contract's view of a service.
func serviceInfo(v service.ServiceView) models.ServiceInfo {
	out := models.ServiceInfo{
		Id: v.ID, ProjectId: v.ProjectID, Name: v.Name, Target: v.Target, State: models.ServiceInfoState(v.State),
		PreviewUrl: v.PreviewURL, TaskId: v.TaskID, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt,
		Domain: optional(v.Domain), DomainUrl: optional(v.DomainURL), BundleId: optional(v.BundleID),
	}
	if v.Version > 0 {
		out.Version = ptr(v.Version)
	}
	if h := v.Health; h != nil {
		out.Health = &models.ServiceHealth{State: models.ServiceHealthState(h.State), Restarts: h.Restarts, Detail: optional(h.Detail)}
		if !h.At.IsZero() {
			out.Health.CheckedAt = ptr(h.At.UTC())
		}
	}
	if sb := v.Sandbox; sb != nil {
		egress := models.ServiceSandboxEgressAllowed
		if !sb.Egress {
			egress = models.ServiceSandboxEgressDenied
		}
		out.Sandbox = &models.ServiceSandbox{Isolation: models.ServiceSandboxIsolation(sb.Isolation), MemoryBytes: int(sb.MemoryBytes),
			CpuMillis: int(sb.CPUMillis), Processes: int(sb.Processes), DiskBytes: int(sb.DiskBytes), TmpBytes: int(sb.TmpBytes), Egress: egress}
	}
	if v.Versions != nil {
		vs := make([]models.ServiceVersion, 0, len(v.Versions))
		for _, x := range v.Versions {
			vs = append(vs, serviceVersion(x))
		}
		out.Versions = &vs
	}
	if len(v.Addons) > 0 {
		out.Addons = &v.Addons
	}
	return out
}

// serviceVersion is the contract's view of one version of a service.
func serviceVersion(v service.Version) models.ServiceVersion {
	out := models.ServiceVersion{Number: v.Number, State: models.ServiceVersionState(v.State), CreatedAt: v.CreatedAt,
		BundleId: optional(v.BundleID), Run: optional(v.Run), TaskId: optional(v.TaskID), Detail: optional(v.Detail)}
	if len(v.EnvNames) > 0 {
		out.EnvNames = &v.EnvNames
	}
	return out
}

// serviceActions are what a service's state leaves to do: read its task
// (and logs, for a process); relaunch or roll back what crashed; tear down
// what is live, failed or crashed.
func serviceActions(v *service.ServiceView) []models.Action {
	next := []models.Action{actions.Tool("get_task", "agent", map[string]any{"id": v.TaskID})}
	if v.RunsProcesses() {
		next = append(next, actions.Tool("get_service_logs", "agent", map[string]any{"id": v.ID}))
	}
	if v.State == service.ServiceCrashed {
		// Relaunch what crashed: its own bundle, which the server knows,
		// so the hint needs nothing filled in.
		relaunch := map[string]any{"id": v.ProjectID, "name": v.Name, "target": v.Target}
		if v.BundleID != "" {
			relaunch["bundleId"] = v.BundleID
			next = append(next, actions.Tool("launch_service", "agent", relaunch))
		} else {
			next = append(next, actions.ToolNeeding("launch_service", "agent", relaunch, "bundleId"))
		}
		if v.Version > 1 {
			next = append(next, actions.Tool("rollback_service", "agent", map[string]any{"id": v.ID}))
		}
	}
	if v.State == service.ServiceLive || v.State == service.ServiceFailed || v.State == service.ServiceCrashed {
		next = append(next, actions.Tool("teardown_service", "agent", map[string]any{"id": v.ID}))
	}
	return next
}
