package service

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// Providers are the external effects a launch drives. Each is idempotent
// towards its provider: a step records its reference before calling, and a
// retried step finds the earlier result instead of acting twice.
type Providers struct {
	// Enqueue hands a task to the durable runner.
	Enqueue func(ctx context.Context, taskID string) error
	// Invalidate tells the edge and DNS caches that hosts or zones changed.
	InvalidateEdge func(hosts ...string)
	InvalidateDNS  func(domain string)
	// Certificate issues or returns the certificate for a host.
	Certificate func(host string) (*tls.Certificate, error)
	// VerifyHTTPS fetches https://host/ from this server's own TLS listener,
	// verifying the chain: a task reports HTTPS-ready only once it is served.
	VerifyHTTPS func(ctx context.Context, host string) error
	Zone        zone.ZoneConfig
	// PreviewDomain is the zone preview hosts live under.
	PreviewDomain string
	// HTTPPort and HTTPSPort are the edge's public ports, for URLs; empty
	// means the scheme's default.
	HTTPPort, HTTPSPort string
}

var serviceNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// launchPayload is what a launch task carries between its steps.
type launchPayload struct {
	ServiceID   string `json:"serviceId"`
	ProjectID   string `json:"projectId"`
	BundleID    string `json:"bundleId"`
	PreviewHost string `json:"previewHost"`
	Domain      string `json:"domain,omitempty"`
	Years       int    `json:"years,omitempty"`
	// Gated: the key lacked buy_domain, so registration waits for a human.
	Gated bool `json:"gated,omitempty"`
	// Approval is "", "approved" or "denied".
	Approval string `json:"approval,omitempty"`
	// Owned: the organisation already bought Domain; the launch attaches
	// it without buying.
	Owned bool `json:"owned,omitempty"`
	// AwaitQuote: the launch waits for a human to approve its quote; the
	// approval consumes the quote and queues the task.
	AwaitQuote    bool   `json:"awaitQuote,omitempty"`
	DomainMicro   int64  `json:"domainMicroUsd,omitempty"`
	ChargedMicro  int64  `json:"chargedMicroUsd"`
	RefundedMicro int64  `json:"refundedMicroUsd,omitempty"`
	QuoteID       string `json:"quoteId,omitempty"`
	Actor         string `json:"actor"`
	// PurchaseRef is recorded before the registrar is called.
	PurchaseRef string       `json:"purchaseRef,omitempty"`
	Receipt     *sdk.Receipt `json:"receipt,omitempty"`
	Undo        *sdk.Undo    `json:"undo,omitempty"`
}

// buys reports whether the launch buys its domain.
func (pl *launchPayload) buys() bool { return pl.Domain != "" && !pl.Owned }

// serves reports whether the launch attaches its domain.
func (pl *launchPayload) serves() bool { return pl.Domain != "" && pl.Approval != "denied" }

// Launch step names, in order.
const (
	StepCharge   = "charge"
	StepRegister = "register_domain"
	StepDNS      = "dns"
	StepDeploy   = "deploy"
	StepTLS      = "tls"
)

// PreviewHost is <service>--<project>.<preview domain>; underscores in ids
// become hyphens so the label is a valid host name.
func (s *Service) PreviewHost(service, projectID string) string {
	return service + "--" + strings.ReplaceAll(strings.ToLower(projectID), "_", "-") + "." + s.P.PreviewDomain
}

func (s *Service) hostURL(scheme, host string) string {
	port := s.P.HTTPSPort
	if scheme == "http" {
		port = s.P.HTTPPort
	}
	if port == "" || port == "443" && scheme == "https" || port == "80" && scheme == "http" {
		return scheme + "://" + host + "/"
	}
	return scheme + "://" + host + ":" + port + "/"
}

// LaunchService creates the named service and its launch task. A quote, when
// given, is consumed here under the project's lock, in the same transaction
// that records the task: the charge happens exactly once, with the task.
func (s *Service) LaunchService(ctx context.Context, p *auth.Principal, projectID string, req sdk.LaunchRequest) (*sdk.TaskHandle, []sdk.Action, error) {
	if !serviceNameRE.MatchString(req.Name) {
		return nil, nil, apierr.New("input:invalid", "name must be a lowercase label such as site").WithDetails(sdk.FieldProblem{Field: "body.name", Problem: "not a label"})
	}
	switch req.Target {
	case "edge":
	case "process", "worker":
		return nil, nil, apierr.Newf("plan:not_implemented", "the %s target is priced by estimate but not yet launched by this deployment; use edge for static sites", req.Target).
			WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": "static_site"}))
	default:
		return nil, nil, apierr.Newf("plan:unknown_target", "target %q is not launchable; use edge for static sites", req.Target).
			WithDetails(sdk.FieldProblem{Field: "body.target", Problem: "unknown target"})
	}
	if req.BundleId == nil || *req.BundleId == "" {
		return nil, nil, apierr.New("input:invalid", "an edge launch needs bundleId; upload the site first",
			actions.Tool("upload_assets", "agent", map[string]any{"projectId": projectID})).
			WithDetails(sdk.FieldProblem{Field: "body.bundleId", Problem: "missing"})
	}
	if err := s.checkServiceQuota(ctx, p.OrgID); err != nil {
		return nil, nil, err
	}
	if _, err := s.Store.Bundles().Get(ctx, p.OrgID, *req.BundleId); errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no bundle %s in your organisation", *req.BundleId)
	} else if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	domain, owned := "", false
	if req.Domain != nil {
		domain = strings.ToLower(*req.Domain)
		org, sold, err := s.Store.Domains().Holder(ctx, domain)
		switch {
		case err == nil && sold && org == p.OrgID:
			owned = true
		case err == nil:
			s.releaseRefusedQuote(ctx, p, req.QuoteId)
			return nil, nil, domainTaken(domain)
		case !errors.Is(err, store.ErrNotFound):
			return nil, nil, apierr.Internal(err)
		}
		if !owned && req.QuoteId == nil {
			return nil, nil, apierr.New("budget:insufficient", "a launch that registers a domain needs a quote that holds its price",
				actions.Tool("create_quote", "agent", map[string]any{"projectId": projectID,
					"items": []any{map[string]any{"kind": "domain", "domain": domain, "years": 1}}}))
		}
	}

	now := s.Now()
	pl := launchPayload{ProjectID: projectID, BundleID: *req.BundleId, Domain: domain, Owned: owned, Years: 1, Actor: actorOf(p),
		Gated: domain != "" && !owned && !p.HasScope("buy_domain")}
	if req.Years != nil {
		pl.Years = *req.Years
	}
	var view *sdk.TaskHandle
	var next []sdk.Action
	var task store.Task
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var costs []Cost
		remainingMicro := int64(0)
		var wait *awaitApproval
		if req.QuoteId != nil {
			c, err := s.ConsumeQuote(ctx, tx, p, projectID, *req.QuoteId)
			if errors.As(err, &wait) {
				c, err = s.awaitedQuote(ctx, tx, p, projectID, *req.QuoteId)
			}
			if err != nil {
				return err
			}
			if err := matchQuote(projectID, c, req, domain, owned); err != nil {
				return err
			}
			for _, it := range c.Items {
				costs = append(costs, Cost{Item: it.label(), Amount: it.AmountMicro})
				if it.Kind == "domain" && it.Domain == domain {
					pl.DomainMicro, pl.Years = it.AmountMicro, it.Years
				}
			}
			pl.ChargedMicro, pl.QuoteID, remainingMicro = c.AmountMicro, c.QuoteID, c.RemainingMicro
			if wait != nil {
				pl.ChargedMicro, pl.AwaitQuote = 0, true
			}
		} else {
			proj, err := tx.Projects().Lock(ctx, p.OrgID, projectID)
			if errors.Is(err, store.ErrNotFound) {
				return projectNotFound(projectID)
			}
			if err != nil {
				return err
			}
			remainingMicro = remaining(proj)
		}

		svc := store.Service{ID: auth.ID("svc"), OrgID: p.OrgID, ProjectID: projectID, Name: req.Name, Target: string(req.Target),
			PreviewHost: s.PreviewHost(req.Name, projectID), Domain: domain, BundleID: *req.BundleId, State: "launching",
			CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
		pl.ServiceID, pl.PreviewHost = svc.ID, svc.PreviewHost
		task = store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, ProjectID: projectID, Kind: "launch", State: "queued", CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
		svc.TaskID = task.ID
		if err := tx.Services().Insert(ctx, svc); errors.Is(err, store.ErrConflict) {
			return apierr.Newf("conflict:state", "the project already has a service named %s; tear it down or pick another name", req.Name)
		} else if err != nil {
			return err
		}
		// One owner per host: the preview host, and the domain with www.
		// under it, belong to this service from now until it fails or is
		// torn down.
		if err := tx.Services().ClaimHost(ctx, svc.PreviewHost, svc.ID, p.OrgID, now); errors.Is(err, store.ErrConflict) {
			return apierr.Newf("conflict:state", "another service answers for %s; tear it down or pick another name", svc.PreviewHost)
		} else if err != nil {
			return err
		}
		if domain != "" {
			for _, h := range []string{domain, "www." + domain} {
				if err := tx.Services().ClaimHost(ctx, h, svc.ID, p.OrgID, now); errors.Is(err, store.ErrConflict) {
					if owned {
						return apierr.Newf("conflict:state", "another of your services answers for %s; tear it down first", h).
							WithActions(actions.Tool("list_services", "agent", map[string]any{"id": projectID}))
					}
					return domainTaken(domain)
				} else if err != nil {
					return err
				}
			}
			if !owned {
				if err := tx.Domains().Claim(ctx, domain, p.OrgID, task.ID, now); errors.Is(err, store.ErrConflict) {
					return domainTaken(domain)
				} else if err != nil {
					return err
				}
			}
		}

		steps := []taskStep{{Name: StepCharge, State: "succeeded", CompletedAt: ptr(now.UTC()), Detail: fmt.Sprintf("%.2f USD", usd(pl.ChargedMicro))}}
		if wait != nil {
			task.State, task.GateID = "input_required", wait.GateID
			steps[0] = taskStep{Name: StepCharge, State: "input_required", StartedAt: ptr(now.UTC()),
				Detail: fmt.Sprintf("a human must approve quote %s (%.2f USD) before it is charged", wait.QuoteID, usd(wait.AmountMicro))}
		}
		register, dns := "pending", "pending"
		switch {
		case domain == "":
			register, dns = "skipped", "skipped"
		case owned:
			register = "skipped"
		}
		steps = append(steps, taskStep{Name: StepRegister, State: register}, taskStep{Name: StepDNS, State: dns},
			taskStep{Name: StepDeploy, State: "pending"}, taskStep{Name: StepTLS, State: "pending"})
		if owned {
			steps[1].Detail = domain + " is already yours; nothing bought"
		}
		m := s.Mutation("launch_service", costs, []sdk.ResourceRef{
			{Type: "service", Id: svc.ID, Url: ptr(s.hostURL("https", svc.PreviewHost))}, {Type: "task", Id: task.ID},
		}, UndoCall("teardown_service", map[string]any{"id": svc.ID}), remainingMicro)
		if pl.buys() {
			// Teardown stops serving; it cannot unbuy the domain.
			m.Undo.Irreversible = true
			m.Undo.NotReversed = &[]string{"domain_registration:" + domain}
		}
		pl.Receipt, pl.Undo = &m.Receipt, &m.Undo
		sj, _ := json.Marshal(steps)
		pj, _ := json.Marshal(pl)
		task.Steps, task.Payload = string(sj), string(pj)
		if err := tx.Tasks().Insert(ctx, task); err != nil {
			return err
		}
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "launch_service", ObjectType: "service", ObjectID: svc.ID,
			Details: map[string]any{"taskId": task.ID, "name": req.Name, "projectId": projectID, "bundleId": pl.BundleID, "domain": domain,
				"chargedMicroUsd": pl.ChargedMicro, "quoteId": pl.QuoteID, "awaitingApproval": pl.AwaitQuote}}, now); err != nil {
			return err
		}
		v, err := s.taskView(task)
		if err != nil {
			return err
		}
		v.Receipt, v.Undo, v.BudgetRemainingUsd = &m.Receipt, &m.Undo, &m.BudgetRemainingUsd
		view = v
		return nil
	})
	if e := apierr.As(err); err != nil && e.Code == "plan:domain_unavailable" {
		s.releaseRefusedQuote(ctx, p, req.QuoteId)
	}
	if err != nil {
		return nil, nil, err
	}
	// The task is committed; if this enqueue is lost, the runner's sweep
	// finds the queued task after a restart.
	if s.P.Enqueue != nil {
		if err := s.P.Enqueue(ctx, task.ID); err != nil {
			s.Log.Warn("enqueue launch", "task", task.ID, "err", err)
		}
	}
	next = []sdk.Action{actions.Retry("get_task", "agent", map[string]any{"id": task.ID}, 1)}
	if task.State == "input_required" {
		next = s.gateActions(task)
	}
	return view, next, nil
}

// RunTask carries a task forward; the durable runner calls it, and calls it
// again after a crash. Every step is safe to repeat.
func (s *Service) RunTask(ctx context.Context, taskID string) error {
	t, err := s.Store.Tasks().GetAnyOrg(ctx, taskID)
	if err != nil {
		return err
	}
	switch t.State {
	case "succeeded", "failed", "canceled", "input_required":
		return nil
	}
	switch t.Kind {
	case "launch":
		return s.runLaunch(ctx, t)
	case "teardown":
		return s.runTeardown(ctx, t)
	}
	return fmt.Errorf("task %s: kind %q has no runner", t.ID, t.Kind)
}

type runningTask struct {
	s     *Service
	t     store.Task
	steps []taskStep
}

func (s *Service) loadRunning(t store.Task, payload any) (*runningTask, error) {
	rt := &runningTask{s: s, t: t}
	if err := json.Unmarshal([]byte(t.Steps), &rt.steps); err != nil {
		return nil, err
	}
	return rt, json.Unmarshal([]byte(t.Payload), payload)
}

func (rt *runningTask) step(name string) *taskStep {
	for i := range rt.steps {
		if rt.steps[i].Name == name {
			return &rt.steps[i]
		}
	}
	return nil
}

// save persists the task, its steps and payload.
func (rt *runningTask) save(ctx context.Context, payload any) error {
	sj, _ := json.Marshal(rt.steps)
	pj, _ := json.Marshal(payload)
	rt.t.Steps, rt.t.Payload, rt.t.UpdatedAt = string(sj), string(pj), rt.s.Now().UTC()
	return rt.s.Store.Tasks().Update(context.WithoutCancel(ctx), rt.t)
}

// boundary is a test hook: Pause.After names a step after whose save the
// runner stops, so a test can kill the process exactly at a step boundary.
func (rt *runningTask) boundary(ctx context.Context, name string) {
	if rt.s.Pause.After == name {
		rt.s.Log.Warn("paused at step boundary", "task", rt.t.ID, "step", name)
		<-ctx.Done()
	}
}

// do runs one step unless it is already done, persisting its state around
// the call.
func (rt *runningTask) do(ctx context.Context, payload any, name string, fn func() (string, error)) error {
	st := rt.step(name)
	if st == nil || st.State == "succeeded" || st.State == "skipped" || st.State == "denied" {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	now := rt.s.Now().UTC()
	st.State, st.StartedAt, st.Detail = "running", &now, ""
	rt.t.State = "running"
	if err := rt.save(ctx, payload); err != nil {
		return err
	}
	detail, err := fn()
	if errors.Is(err, errInputRequired) {
		return err
	}
	if err == nil && rt.s.Pause.Inside == name {
		// The provider acted but the step is not saved: the worst moment to die.
		rt.s.Log.Warn("paused inside step", "task", rt.t.ID, "step", name)
		<-ctx.Done()
		return ctx.Err()
	}
	done := rt.s.Now().UTC()
	if err != nil {
		st.Detail = err.Error()
		rt.save(ctx, payload)
		return err
	}
	st.State, st.CompletedAt, st.Detail = "succeeded", &done, detail
	if err := rt.save(ctx, payload); err != nil {
		return err
	}
	rt.boundary(ctx, name)
	return ctx.Err()
}

var errInputRequired = errors.New("task waits for a human")

func (s *Service) runLaunch(ctx context.Context, t store.Task) error {
	var pl launchPayload
	rt, err := s.loadRunning(t, &pl)
	if err != nil {
		return err
	}
	rt.boundary(ctx, StepCharge)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err = rt.do(ctx, &pl, StepRegister, func() (string, error) { return s.registerDomain(ctx, rt, &pl) })
	if errors.Is(err, errInputRequired) {
		return nil
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepDNS, func() (string, error) { return s.publishZone(ctx, rt.t.OrgID, pl.Domain) })
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepDeploy, func() (string, error) {
			if err := s.Store.Services().SetState(ctx, pl.ServiceID, "live", s.Now()); err != nil {
				return "", err
			}
			s.invalidate(pl.PreviewHost, pl.Domain)
			return "bundle " + pl.BundleID + " live", nil
		})
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepTLS, func() (string, error) { return s.makeHTTPSReady(ctx, &pl) })
	}
	if err != nil {
		// A typed error that retrying cannot mend ends the task now; anything
		// else is transient and the runner retries it with bounded backoff.
		var e *apierr.Error
		if errors.As(err, &e) && !e.Retryable() && ctx.Err() == nil {
			if ferr := s.failLaunch(context.WithoutCancel(ctx), rt.t.ID, e); ferr != nil {
				return ferr
			}
			rt.boundary(ctx, "failed")
			return nil
		}
		return err
	}
	result := map[string]any{"serviceId": pl.ServiceID, "previewUrl": s.hostURL("https", pl.PreviewHost),
		"httpsReady": map[string]any{"preview": true, "domain": pl.serves()}}
	if pl.serves() {
		result["domainUrl"] = s.hostURL("https", pl.Domain)
	}
	if pl.Approval == "denied" {
		result["domain"] = "registration of " + pl.Domain + " denied by a human: not bought, not attached, its price refunded"
	}
	rj, _ := json.Marshal(result)
	rt.t.State, rt.t.Result = "succeeded", string(rj)
	if err := rt.save(ctx, &pl); err != nil {
		return err
	}
	return s.Store.InTx(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		if err := tx.Domains().ReleaseClaims(ctx, rt.t.ID); err != nil {
			return err
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: rt.t.OrgID, Actor: "system", Action: "launch_succeeded", ObjectType: "task", ObjectID: rt.t.ID,
			Details: map[string]any{"serviceId": pl.ServiceID, "previewHost": pl.PreviewHost, "domain": pl.Domain}}, s.Now())
		return err
	})
}

func (s *Service) invalidate(hosts ...string) {
	if s.P.InvalidateEdge == nil {
		return
	}
	var all []string
	for _, h := range hosts {
		if h != "" {
			all = append(all, h, "www."+h)
		}
	}
	s.P.InvalidateEdge(all...)
}

// registerDomain buys the domain once. Without buy_domain it first waits for
// a human: the step and task go to input_required on a gate, and the
// decision re-enqueues the task.
func (s *Service) registerDomain(ctx context.Context, rt *runningTask, pl *launchPayload) (string, error) {
	if pl.Gated && pl.Approval == "" {
		if rt.t.GateID == "" {
			err := s.Store.InTx(ctx, func(tx *store.Tx) error {
				p := &auth.Principal{Kind: "system", OrgID: rt.t.OrgID}
				now := s.Now()
				body, _ := json.Marshal(map[string]any{"taskId": rt.t.ID, "domain": pl.Domain, "years": pl.Years,
					"projectId": pl.ProjectID, "amountMicroUsd": pl.DomainMicro, "requestedBy": pl.Actor})
				gateID := auth.ID("gat")
				if err := tx.Gates().Insert(ctx, store.Gate{ID: gateID, OrgID: rt.t.OrgID, TaskID: rt.t.ID, Kind: "domain_registration", Payload: string(body), CreatedAt: now.UTC()}); err != nil {
					return err
				}
				rt.t.GateID = gateID
				_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: "system", Action: "open_gate", ObjectType: "gate", ObjectID: gateID,
					Details: map[string]any{"kind": "domain_registration", "taskId": rt.t.ID, "domain": pl.Domain}}, now)
				return err
			})
			if err != nil {
				return "", err
			}
		}
		st := rt.step(StepRegister)
		st.State, st.Detail = "input_required", "a human must approve buying "+pl.Domain
		rt.t.State = "input_required"
		if err := rt.save(ctx, pl); err != nil {
			return "", err
		}
		return "", errInputRequired
	}
	if pl.Approval == "denied" {
		return "denied by a human; not bought", nil
	}
	if err := s.recheckDomain(ctx, rt, pl); err != nil {
		return "", err
	}
	if pl.PurchaseRef == "" {
		// Record the reference before calling the registrar, so that a
		// retry asks for the same purchase instead of making another.
		pl.PurchaseRef = rt.t.ID
		if err := rt.save(ctx, pl); err != nil {
			return "", err
		}
	}
	purchase, err := s.Store.Domains().RecordPurchase(ctx, store.Purchase{Ref: pl.PurchaseRef, Domain: pl.Domain, OrgID: rt.t.OrgID, Years: pl.Years,
		AmountMicro: pl.DomainMicro, AuthCode: auth.Token(12), CreatedAt: s.Now().UTC()})
	if errors.Is(err, store.ErrConflict) {
		return "", apierr.Newf("plan:domain_unavailable", "%s was sold to someone else before this launch could buy it", pl.Domain)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("registered %s for %d year(s) (ref %s)", purchase.Domain, purchase.Years, purchase.Ref), nil
}

func (s *Service) publishZone(ctx context.Context, orgID, domain string) (string, error) {
	recs := zone.BuildZone(domain, s.P.Zone)
	if err := s.Store.Domains().PutZone(ctx, store.Zone{Domain: domain, OrgID: orgID, Serial: s.Now().Unix(), Records: zone.EncodeRecords(recs), UpdatedAt: s.Now()}); err != nil {
		return "", err
	}
	if s.P.InvalidateDNS != nil {
		s.P.InvalidateDNS(domain)
	}
	return fmt.Sprintf("zone %s with %d records", domain, len(recs)), nil
}

func (s *Service) makeHTTPSReady(ctx context.Context, pl *launchPayload) (string, error) {
	// Certificates only for the hosts this service holds: a host another
	// service owns, or a denied domain, gets none.
	hosts, err := s.Store.Services().Hosts(ctx, pl.ServiceID)
	if err != nil {
		return "", err
	}
	if !slices.Contains(hosts, pl.PreviewHost) {
		s.Log.Warn("service does not hold its preview host", "service", pl.ServiceID, "host", pl.PreviewHost, "held", hosts)
		return "", fmt.Errorf("service %s does not hold %s yet", pl.ServiceID, pl.PreviewHost)
	}
	slices.SortFunc(hosts, func(a, b string) int { return cmp.Compare(len(a), len(b)) })
	for _, h := range hosts {
		if s.P.Certificate != nil {
			if _, err := s.P.Certificate(h); err != nil {
				return "", fmt.Errorf("certificate for %s: %w", h, err)
			}
		}
		if s.P.VerifyHTTPS != nil {
			vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := s.P.VerifyHTTPS(vctx, h)
			cancel()
			if err != nil {
				return "", fmt.Errorf("https://%s not served yet: %w", h, err)
			}
		}
	}
	return "HTTPS ready: " + strings.Join(hosts, ", "), nil
}

// FailTask marks a task failed after its runner gave up on it. A launch
// ends as any permanent failure does: refunded, its service retired.
func (s *Service) FailTask(ctx context.Context, taskID string, cause error) {
	t, err := s.Store.Tasks().GetAnyOrg(ctx, taskID)
	if err != nil {
		s.Log.Error("failing task", "task", taskID, "err", err)
		return
	}
	if t.Kind == "launch" {
		if err := s.failLaunch(ctx, taskID, gaveUp(cause)); err != nil {
			s.Log.Error("failing task", "task", taskID, "err", err)
		}
		return
	}
	rj, _ := json.Marshal(map[string]any{"error": cause.Error(), "blockedBy": "provider:failed", "retryable": false})
	t.State, t.Result, t.UpdatedAt = "failed", string(rj), s.Now().UTC()
	if err := s.Store.Tasks().Update(ctx, t); err != nil {
		s.Log.Error("failing task", "task", taskID, "err", err)
	}
}
