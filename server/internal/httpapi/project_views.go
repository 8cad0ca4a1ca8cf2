package httpapi

import (
	"encoding/base64"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
)

// project is the contract's view of a project.
func project(v service.Project) models.Project {
	period := budgetPeriod(v.Period)
	out := models.Project{
		Id: v.ID, Name: v.Name, BudgetLimitUsd: v.Limit.USD(), SpentUsd: v.Spent.USD(), HeldUsd: v.Held.USD(), RemainingUsd: v.Remaining.USD(),
		ActiveHolds: make([]models.Hold, 0, len(v.Holds)), CreatedAt: v.CreatedAt, ParentProjectId: optional(v.ParentID),
		Policy: projectPolicy(v.Policy), Period: &period,
	}
	for _, h := range v.Holds {
		out.ActiveHolds = append(out.ActiveHolds, models.Hold{QuoteId: h.QuoteID, AmountUsd: h.Amount.USD(), ExpiresAt: h.ExpiresAt})
	}
	if v.KeyCaps != nil {
		caps := make([]models.KeyCapView, 0, len(v.KeyCaps))
		for _, ks := range v.KeyCaps {
			k := ks.Key
			caps = append(caps, models.KeyCapView{KeyId: k.ID, KeyName: k.Name, CapUsd: k.CapMicro.USD(),
				Period: models.KeyCapViewPeriod(k.CapPeriod), PeriodStart: ks.PeriodStart, SpentUsd: ks.SpentMicro.USD()})
		}
		out.KeyCaps = &caps
	}
	return out
}

// projectPolicy is the contract's view of a project's policy: what was
// never set stays absent.
func projectPolicy(p service.ProjectPolicy) models.ProjectPolicy {
	out := models.ProjectPolicy{
		TldAllowlist: p.TLDAllowlist, TldDenylist: p.TLDDenylist,
		MaxFirstYearPriceUsd: usdOrNil(p.MaxFirstYearPrice), MaxRenewalPriceUsd: usdOrNil(p.MaxRenewalPrice),
		ApprovalRules: models.ApprovalRules{ApprovalAboveUsd: usdOrNil(p.ApprovalRules.ApprovalAbove),
			DomainPurchases: models.ApprovalRulesDomainPurchases(p.ApprovalRules.DomainPurchases)},
	}
	if p.BudgetPeriod != "" {
		out.BudgetPeriod = ptr(models.ProjectPolicyBudgetPeriod(p.BudgetPeriod))
	}
	if p.OnExhausted != "" {
		out.OnBudgetExhausted = ptr(models.ProjectPolicyOnBudgetExhausted(p.OnExhausted))
	}
	if p.Egress != "" {
		out.ServiceEgress = ptr(models.ProjectPolicyServiceEgress(p.Egress))
	}
	return out
}

// usdOrNil is an optional amount as the contract writes it.
func usdOrNil(m *money.MicroUSD) *float64 {
	if m == nil {
		return nil
	}
	return ptr(m.USD())
}

// budgetPeriod is the contract's view of a budget's current period.
func budgetPeriod(v service.PeriodView) models.BudgetPeriodView {
	out := models.BudgetPeriodView{Kind: models.BudgetPeriodViewKind(v.Kind), Period: v.Period, Start: v.Start, End: v.End,
		SpentUsd: v.Spent.USD(), HeldUsd: v.Held.USD(), AccruedUsd: v.Accrued.USD(), ForecastUsd: v.Forecast.USD()}
	out.Notices = make([]struct {
		At      time.Time `json:"at"`
		Percent int       `json:"percent"`
	}, 0, len(v.Thresholds))
	for _, n := range v.Thresholds {
		out.Notices = append(out.Notices, struct {
			At      time.Time `json:"at"`
			Percent int       `json:"percent"`
		}{At: n.At, Percent: n.Percent})
	}
	return out
}

// projectDeletion is the contract's view of a project's deletion.
func projectDeletion(d *service.ProjectDeletion) models.ProjectDeletion {
	m := wireMutated(d.Mutated)
	return models.ProjectDeletion{ProjectId: d.ProjectID, Name: d.Name, ParentProjectId: d.ParentID, State: models.ProjectDeletionState(d.State),
		TeardownTaskIds: nonNil(d.TeardownTasks), CanceledTaskIds: nonNil(d.CanceledTasks), ReturnedUsd: d.Returned.USD(), DeletedAt: d.DeletedAt,
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
}

// nonNil is ids, empty rather than absent.
func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// leavePackage is the contract's view of a leave package: every file
// with its content in base64.
func leavePackage(p *service.LeavePackage) models.LeavePackage {
	m := wireMutated(p.Mutated)
	out := models.LeavePackage{ProjectId: p.ProjectID, ManifestSha256: p.ManifestSHA256, Files: make([]models.PackageFile, 0, len(p.Files)),
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	for _, f := range p.Files {
		out.Files = append(out.Files, models.PackageFile{Path: f.Path, Sha256: f.SHA256, Size: f.Size,
			ContentBase64: ptr(base64.StdEncoding.EncodeToString(f.Content))})
	}
	return out
}

// whoami is the contract's view of who the caller is.
func whoami(w *service.Whoami) models.Whoami {
	out := models.Whoami{Scopes: w.Scopes, Projects: make([]models.WhoamiProject, 0, len(w.Projects)), Project: optional(w.Project)}
	out.Key.Id, out.Key.Kind, out.Key.Name = w.KeyID, models.WhoamiKeyKind(w.KeyKind), w.KeyName
	if ks := w.SpendCap; ks != nil {
		out.Key.SpendCap = &models.KeySpendCap{CapUsd: ks.Key.CapMicro.USD(), Period: models.KeySpendCapPeriod(ks.Key.CapPeriod),
			SpentUsd: ks.SpentMicro.USD(), PeriodStart: ks.PeriodStart}
	}
	out.Organization.Id, out.Organization.Name = w.OrgID, w.OrgName
	for _, p := range w.Projects {
		out.Projects = append(out.Projects, models.WhoamiProject{Id: p.ID, Name: p.Name, BudgetLimitUsd: p.Limit.USD(), RemainingUsd: p.Remaining.USD()})
	}
	out.Caps.Services, out.Caps.Bundles, out.Caps.StorageBytes = w.Quotas.Services, w.Quotas.Bundles, w.Quotas.StorageBytes
	out.Server.BaseUrl, out.Server.Version = w.BaseURL, w.Version
	return out
}
