// Package workflow prepares and applies workflows (SPEC §2.7): a finite
// graph of operations of the contract, signed as a plan that reserves
// nothing, then applied once as a durable task after everything it read is
// checked again. Steps run as in-process tool calls for the agent that
// applied the plan (the signature proves the plan unchanged; it grants no
// authority), each under an idempotency key derived from the plan and the
// step, so a step that is retried (after a crash, say) replays rather than
// repeats.
package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/internal/lib/workflowplan"
	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/operation"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// Invoker calls operations in-process as their MCP tools: the MCP handler.
type Invoker interface {
	Validate(tool string, args map[string]any) error
	Invoke(ctx context.Context, tool string, args map[string]any, idempotencyKey string) (int, []byte, error)
}

// Records is what the engine keeps in the store itself: prepared
// workflows, the tasks that run them, its plan-signing key, and the
// transactions that apply a workflow. *store.Store is one.
type Records interface {
	Workflows() store.Workflows
	Tasks() store.Tasks
	// Projects gives what remains of a plan's project budget.
	Projects() store.Projects
	SandboxReleases() store.SandboxReleases
	InTx(ctx context.Context, fn func(tx *store.Tx) error) error
}

// Config is what the engine is given at construction.
type Config struct {
	Store   Records
	Service *service.Service
	// Invoker gives the MCP handler, which is built after the engine.
	Invoker func() Invoker
	// Enqueue hands a committed task to the durable runner.
	Enqueue func(ctx context.Context, taskID string) error
	Now     func() time.Time
	Log     *slog.Logger
	// PauseAfter names a step at whose saved boundary the runner stops, for
	// crash tests.
	PauseAfter string
	// PauseInside names a step whose operation the runner calls and then
	// stops before saving the step, for crash tests.
	PauseInside string
	// ChildWait bounds how long one run waits on a launch or teardown
	// before letting the runner call again; default 20 s.
	ChildWait time.Duration
}

// Engine prepares, applies and runs workflows.
type Engine struct {
	cfg Config

	keyMu sync.Mutex
	key   *sandboxproof.SigningKey
}

// New returns an engine.
func New(cfg Config) *Engine {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ChildWait == 0 {
		cfg.ChildWait = 20 * time.Second
	}
	return &Engine{cfg: cfg}
}

const keyName = "workflow-plan"

// signingKey loads the plan key, making it on first use; replicas racing to
// make it all end up with the winner's.
func (e *Engine) signingKey(ctx context.Context) (*sandboxproof.SigningKey, error) {
	e.keyMu.Lock()
	defer e.keyMu.Unlock()
	if e.key != nil {
		return e.key, nil
	}
	keys := e.cfg.Store.SandboxReleases()
	raw, err := keys.Key(ctx, keyName)
	if errors.Is(err, store.ErrNotFound) {
		if err := e.makeKey(ctx); err != nil {
			return nil, err
		}
		raw, err = keys.Key(ctx, keyName)
	}
	if err != nil {
		return nil, err
	}
	k, err := sandboxproof.ParseSigningKey([]byte(raw))
	if err != nil {
		return nil, err
	}
	e.key = k
	return k, nil
}

func (e *Engine) makeKey(ctx context.Context) error {
	k, err := sandboxproof.GenerateSigningKey()
	if err != nil {
		return err
	}
	b, err := k.MarshalPrivateJWK()
	if err != nil {
		return err
	}
	return e.cfg.Store.SandboxReleases().PutKeyIfAbsent(ctx, keyName, string(b), e.cfg.Now())
}

// JWKS is the public key set plans are signed with.
func (e *Engine) JWKS(ctx context.Context) ([]byte, error) {
	k, err := e.signingKey(ctx)
	if err != nil {
		return nil, err
	}
	return sandboxproof.PublicJWKS(k)
}

func callerOf(p *auth.Principal) string {
	if p.GrantID != "" {
		return "grant:" + p.GrantID
	}
	return "key:" + p.KeyID
}

// principalOf is the agent a workflow's steps run as: the caller that
// applied it, recorded in the task, within the workflow's organisation.
func principalOf(w store.Workflow, pl payload) *auth.Principal {
	caller := pl.AppliedBy
	if caller == "" {
		// A task applied before the applier was recorded.
		caller = w.Caller
	}
	kind, id, _ := strings.Cut(caller, ":")
	p := &auth.Principal{Kind: "agent", OrgID: w.OrgID, Caller: caller}
	if kind == "grant" {
		p.GrantID = id
	} else {
		p.KeyID = id
	}
	return p
}

// analysis is what a plan reads: each step priced and judged, the versions
// of what it names, and the total.
type analysis struct {
	steps    []workflowplan.Step
	versions []workflowplan.Version
	total    money.MicroUSD
}

// analyze reads everything the steps name, for prepare and again for apply.
func (e *Engine) analyze(ctx context.Context, p *auth.Principal, projectID string, steps []models.WorkflowStep) (*analysis, error) {
	ps, err := e.cfg.Service.Projects.State(ctx, p, projectID)
	if err != nil {
		return nil, err
	}
	r := &stepReader{e: e, svc: e.cfg.Service, p: p, projectID: projectID, seen: map[string]bool{}, tools: map[string]string{},
		a: &analysis{versions: []workflowplan.Version{{Type: "project", ID: projectID, Version: ps.Version}}}}
	for i, s := range steps {
		st, err := r.read(ctx, i, s)
		if err != nil {
			return nil, err
		}
		r.a.total += money.MicroUSD(st.PriceMicro)
		r.a.steps = append(r.a.steps, st)
	}
	if a := r.a; a.total > ps.RemainingMicro {
		return nil, apierr.Newf("budget:insufficient", "the workflow's quotes hold %s and the project has %s left",
			a.total, ps.RemainingMicro).
			WithActions(actions.Tool("request_budget_raise", "agent", map[string]any{"id": projectID,
				"amountUsd": (a.total - ps.RemainingMicro).USD(), "reason": "a workflow's quotes"}))
	}
	return r.a, nil
}

// stepReader is one analysis under way: the steps read so far, and the
// versions of what they name, each recorded once.
type stepReader struct {
	e         *Engine
	svc       *service.Service
	p         *auth.Principal
	projectID string
	a         *analysis
	seen      map[string]bool
	tools     map[string]string // step ID to its tool, for the references of later steps
}

// version records the version a plan was made against, once for each thing.
func (r *stepReader) version(typ, id, v string) {
	if !r.seen[typ+"\x00"+id] {
		r.seen[typ+"\x00"+id] = true
		r.a.versions = append(r.a.versions, workflowplan.Version{Type: typ, ID: id, Version: v})
	}
}

// read checks the i-th step's authority and arguments and judges it: its
// price, whether a human approves it, and whether it can be undone.
func (r *stepReader) read(ctx context.Context, i int, s models.WorkflowStep) (workflowplan.Step, error) {
	p := r.p
	r.tools[s.Id] = string(s.Tool)
	field := fmt.Sprintf("body.steps.%d", i)
	// The caller must be able to call each step's operation itself: a
	// plan lends no authority.
	if op, ok := operation.Lookup(string(s.Tool)); ok && op.Scope != "" && !p.HasScope(op.Scope) {
		return workflowplan.Step{}, apierr.Newf("auth:insufficient_scope", "step %s calls %s, which needs a key with the %s scope; this key lacks it, and a human can grant it on the keys page", s.Id, s.Tool, op.Scope).
			WithActions(actions.Manual("grant_scope", "human"))
	}
	st := workflowplan.Step{ID: s.Id, Tool: string(s.Tool), Arguments: s.Arguments, After: *s.After}
	if st.Arguments == nil {
		st.Arguments = map[string]any{}
	}
	args, err := r.validate(ctx, field, &st)
	if err != nil {
		return st, err
	}
	switch st.Tool {
	case "create_quote":
		err = r.judgeQuote(ctx, field, &st, args)
	case "launch_service":
		err = r.judgeLaunch(ctx, field, &st)
	case "setup_email", "set_registrant_contact":
		err = r.judgeDomainStep(ctx, field, &st)
	case "teardown_service":
		err = r.judgeTeardown(ctx, field, &st)
	}
	return st, err
}

// literal is a step's string argument when it is a value, not a reference
// to an earlier step's output.
func literal(st *workflowplan.Step, name string) (string, bool) {
	v, ok := st.Arguments[name].(string)
	return v, ok && !refRE().MatchString(v)
}

// validate checks a step's arguments as its operation would be called, with
// each reference standing in as a value of the right shape, and returns
// those sample arguments.
func (r *stepReader) validate(ctx context.Context, field string, st *workflowplan.Step) (map[string]any, error) {
	sample, err := substitute(st.Arguments, 0, func(step, f string) (any, bool) {
		v, ok := outputs[r.tools[step]][f]
		return v, ok
	})
	if err != nil {
		return nil, invalid(field+".arguments", "%v", err)
	}
	args := sample.(map[string]any)
	if st.Tool == "upload_assets" {
		id, ok := literal(st, "bundleId")
		if !ok || len(st.Arguments) != 1 {
			return nil, invalid(field+".arguments", "an upload_assets step names an uploaded bundle, and only that: {\"bundleId\": \"bnd_…\"}")
		}
		v, err := r.svc.Bundles.Version(ctx, r.p, id)
		if err != nil {
			return nil, err
		}
		r.version("bundle", id, v)
		return args, nil
	}
	if err := r.e.cfg.Invoker().Validate(st.Tool, args); err != nil {
		var ae *apierr.Error
		if errors.As(err, &ae) {
			return nil, apierr.New(ae.Code, "step "+st.ID+": "+ae.Message).WithDetails(ae.Details...)
		}
		return nil, invalid(field, "%v", err)
	}
	return args, nil
}

// judgeQuote prices a create_quote step by previewing the quote.
func (r *stepReader) judgeQuote(ctx context.Context, field string, st *workflowplan.Step, args map[string]any) error {
	if pid, _ := st.Arguments["projectId"].(string); pid != r.projectID {
		return invalid(field+".arguments.projectId", "a step quotes for the workflow's project, %s", r.projectID)
	}
	var req models.QuoteRequest
	b, _ := json.Marshal(args)
	if err := json.Unmarshal(b, &req); err != nil {
		return invalid(field+".arguments", "%v", err)
	}
	pv, err := r.svc.Quotes.Preview(ctx, r.p, r.projectID, httpapi.QuoteItems(req.Items))
	if err != nil {
		return err
	}
	if pv.Decision == service.QuoteDeny {
		return apierr.Newf(pv.Reasons[0], "step %s: the quote would be denied (%s)", st.ID, joinCodes(pv.Reasons))
	}
	st.PriceMicro = int64(pv.AmountMicro)
	if pv.Decision == service.QuoteRequiresApproval {
		st.NeedsApproval, st.Approval = true, "the quote is above the project's approval threshold; a human approves it"
	}
	for _, d := range pv.Domains {
		state, err := r.svc.Domains.State(ctx, r.p, d)
		if err != nil {
			return err
		}
		r.version("domain", d, string(state))
	}
	return nil
}

// judgeLaunch records the bundle and domain a launch_service step names; a
// domain not yet owned makes the launch a purchase.
func (r *stepReader) judgeLaunch(ctx context.Context, field string, st *workflowplan.Step) error {
	if pid, _ := st.Arguments["id"].(string); pid != r.projectID {
		return invalid(field+".arguments.id", "a step launches in the workflow's project, %s", r.projectID)
	}
	if id, ok := literal(st, "bundleId"); ok {
		v, err := r.svc.Bundles.Version(ctx, r.p, id)
		if err != nil {
			return err
		}
		r.version("bundle", id, v)
	}
	d, ok := literal(st, "domain")
	if !ok || d == "" {
		return nil
	}
	state, err := r.domainState(ctx, st, strings.ToLower(d))
	if err != nil {
		return err
	}
	if state != service.DomainOwned {
		st.Irreversible = true
		if !r.p.HasScope("buy_domain") {
			st.NeedsApproval, st.Approval = true, "registering "+strings.ToLower(d)+" buys it: the key lacks buy_domain, so a human approves the purchase"
		}
	}
	return nil
}

// judgeDomainStep records the domain a setup_email or
// set_registrant_contact step names; confirming a registrant is a person's
// act, and cannot be undone.
func (r *stepReader) judgeDomainStep(ctx context.Context, field string, st *workflowplan.Step) error {
	d, ok := literal(st, "domain")
	if !ok {
		return invalid(field+".arguments.domain", "the step names the domain")
	}
	if _, err := r.domainState(ctx, st, strings.ToLower(d)); err != nil {
		return err
	}
	if st.Tool == "set_registrant_contact" {
		st.NeedsApproval, st.Approval = true, "a person confirms the registrant: signed in, at the approval URL, or from a link mailed to an address no agent key can read"
		st.Irreversible = true
	}
	return nil
}

// domainState records the state of a domain a step names, refusing one
// registered to someone else.
func (r *stepReader) domainState(ctx context.Context, st *workflowplan.Step, d string) (service.DomainState, error) {
	state, err := r.svc.Domains.State(ctx, r.p, d)
	if err != nil {
		return "", err
	}
	if state == service.DomainTaken {
		return "", apierr.Newf("plan:domain_unavailable", "step %s: %s is registered to someone else", st.ID, d)
	}
	r.version("domain", d, string(state))
	return state, nil
}

// judgeTeardown records the version of the service a teardown_service
// step stops; a teardown cannot be undone.
func (r *stepReader) judgeTeardown(ctx context.Context, field string, st *workflowplan.Step) error {
	id, ok := literal(st, "id")
	if !ok {
		return invalid(field+".arguments.id", "a teardown names the service it stops")
	}
	v, err := r.svc.Launches.ServiceVersion(ctx, r.p, id)
	if err != nil {
		return err
	}
	r.version("service", id, v)
	st.Irreversible = true
	return nil
}

func joinCodes(cs []models.BlockedBy) string {
	var s []string
	for _, c := range cs {
		s = append(s, string(c))
	}
	return strings.Join(s, ", ")
}

// Prepare validates, canonicalizes, signs and persists a workflow. It
// holds no budget, creates no task and calls no provider.
func (e *Engine) Prepare(ctx context.Context, p *auth.Principal, req models.WorkflowRequest) (*models.PreparedWorkflow, []models.Action, error) {
	raw, _ := json.Marshal(req)
	if len(raw) > MaxPlanBytes {
		return nil, nil, invalid("body", "the workflow is %d bytes; at most %d", len(raw), MaxPlanBytes)
	}
	steps, err := order(req.Steps)
	if err != nil {
		return nil, nil, err
	}
	a, err := e.analyze(ctx, p, req.ProjectId, steps)
	if err != nil {
		return nil, nil, err
	}
	key, err := e.signingKey(ctx)
	if err != nil {
		return nil, nil, err
	}
	now := e.cfg.Now().UTC()
	plan := workflowplan.Plan{
		Kind: workflowplan.Kind, WorkflowID: auth.ID("wfl"), OrgID: p.OrgID, ProjectID: req.ProjectId,
		PreparedBy: callerOf(p), PreparedAt: now.Format(time.RFC3339), Steps: a.steps, Versions: a.versions,
		TotalMicro: int64(a.total), SignedByKID: key.KID,
	}
	canon, digest, err := workflowplan.Canonical(plan)
	if err != nil {
		return nil, nil, err
	}
	signed, err := workflowplan.Sign(key.Private, key.KID, canon)
	if err != nil {
		return nil, nil, err
	}
	w := store.Workflow{ID: plan.WorkflowID, OrgID: p.OrgID, ProjectID: req.ProjectId, Caller: plan.PreparedBy, Digest: digest,
		Plan: string(canon), SignedPlan: signed, KeyID: key.KID, Projection: "{}", CreatedAt: now}
	err = e.cfg.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.Workflows().Insert(ctx, w); err != nil {
			return err
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: "agent:" + plan.PreparedBy, Action: "prepare_workflow",
			ObjectType: "workflow", ObjectID: w.ID, Details: map[string]any{"projectId": w.ProjectID, "digest": digest, "steps": len(a.steps), "totalMicroUsd": a.total}}, now)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	view, err := e.view(ctx, w, plan)
	if err != nil {
		return nil, nil, err
	}
	return view, []models.Action{
		actions.Tool("apply_workflow", "agent", map[string]any{"id": w.ID, "signedPlan": signed}),
		actions.Tool("get_workflow", "agent", map[string]any{"id": w.ID}),
	}, nil
}

// project is the safe projection of a plan for a human.
func project(w store.Workflow, plan workflowplan.Plan) *models.PreparedWorkflow {
	out := &models.PreparedWorkflow{
		WorkflowId: w.ID, ProjectId: w.ProjectID, Digest: w.Digest, SignedPlan: w.SignedPlan, KeyId: w.KeyID,
		TotalUsd: money.MicroUSD(plan.TotalMicro).USD(), CreatedAt: w.CreatedAt, State: models.Prepared,
		Steps: []models.WorkflowStepProjection{}, Versions: []models.ResourceVersion{},
	}
	if w.TaskID != "" {
		out.State, out.TaskId = models.Applied, &w.TaskID
	}
	for _, s := range plan.Steps {
		ps := models.WorkflowStepProjection{Id: s.ID, Tool: s.Tool, Arguments: s.Arguments, After: s.After,
			PriceUsd: money.MicroUSD(s.PriceMicro).USD(), Irreversible: s.Irreversible, NeedsApproval: s.NeedsApproval}
		if s.Approval != "" {
			ps.ApprovalReason = &s.Approval
		}
		out.Steps = append(out.Steps, ps)
	}
	for _, v := range plan.Versions {
		out.Versions = append(out.Versions, models.ResourceVersion{Type: v.Type, Id: v.ID, Version: v.Version})
	}
	return out
}

func decodePlan(w store.Workflow) (workflowplan.Plan, error) {
	var plan workflowplan.Plan
	dec := json.NewDecoder(strings.NewReader(w.Plan))
	dec.UseNumber()
	err := dec.Decode(&plan)
	return plan, err
}

// Get reads a workflow of the caller's organisation.
func (e *Engine) Get(ctx context.Context, p *auth.Principal, id string) (*models.PreparedWorkflow, []models.Action, error) {
	w, err := e.cfg.Store.Workflows().Get(ctx, p.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no workflow %s in your organisation", id)
	}
	if err != nil {
		return nil, nil, err
	}
	plan, err := decodePlan(w)
	if err != nil {
		return nil, nil, err
	}
	next := []models.Action{actions.Tool("apply_workflow", "agent", map[string]any{"id": w.ID})}
	if w.TaskID != "" {
		next = []models.Action{actions.Tool("get_task", "agent", map[string]any{"id": w.TaskID})}
	}
	view, err := e.view(ctx, w, plan)
	return view, next, err
}

// view is the projection with the members every answer about a prepared
// workflow carries: the receipt of its preparation (which costs nothing
// and created the workflow; its id follows from the workflow's, so every
// read shows the same), the undo marker (nothing deletes a plan; an
// unapplied one does nothing), and what remains of the project's budget.
func (e *Engine) view(ctx context.Context, w store.Workflow, plan workflowplan.Plan) (*models.PreparedWorkflow, error) {
	out := project(w, plan)
	proj, err := e.cfg.Store.Projects().Get(ctx, w.OrgID, w.ProjectID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	out.Receipt = models.Receipt{Id: "rcp_" + strings.TrimPrefix(w.ID, "wfl_"), Action: "prepare_workflow", Costs: []models.CostLine{},
		CreatedResources: []models.ResourceRef{{Type: "workflow", Id: w.ID}}, CreatedAt: w.CreatedAt.UTC()}
	out.Undo = models.Undo{Irreversible: true}
	out.BudgetRemainingUsd = float64(proj.LimitMicro-proj.SpentMicro-proj.HeldMicro) / 1e6
	return out, nil
}
