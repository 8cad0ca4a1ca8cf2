package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/pierhq/pier/holder"
)

// governedProbes each record, in a note ending their spec, the holder they
// act as (SPEC.md §5): none, or simulated for the sandbox mandate flow the
// runner drives headless with a fresh key. The report has no member of its
// own for this (SPEC.md §2.11 allows none), so the note is the record, and
// ProbeHolder reads it back. The runner is never a human holder: no run of
// it supports the human-separation claim.
var governedProbes = []probe{
	{"governed.project", "SPEC.md §5" + holderNote(HolderNone), probeProject},
	{"governed.quote-hold", "SPEC.md §3 rule 1, §8" + holderNote(HolderNone), probeQuoteHold},
	{"governed.launch-teardown", "SPEC.md §2.3, §2.4, §4" + holderNote(HolderNone), probeLaunchTeardown},
	{"governed.gate-input-required", "SPEC.md §3 rule 3" + holderNote(HolderNone), probeGate},
	{"governed.holder-refuses-agent", "SPEC.md §7 rule 5, §4 rule 2" + holderNote(HolderNone), probeHolderRefusesAgent},
	{"governed.sandbox-mandate", "SPEC.md §2.9, §4 rule 2, §5" + holderNote(HolderSimulated), probeSandboxMandate},
}

func probeProject(ctx context.Context, r *runner, p *probeRun) error {
	return r.needProject(ctx, p)
}

// success checks a success answer: the status and the envelope's schema.
func success(x *response, status int) error {
	if x.status != status {
		return fmt.Errorf("status %d, want %d: %.300s", x.status, status, x.body)
	}
	return conformsTo("envelope.json", x.body)
}

func probeQuoteHold(ctx context.Context, r *runner, p *probeRun) error {
	if err := r.needProject(ctx, p); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{
		"projectId": r.project,
		"items":     []map[string]any{{"kind": "service", "target": "process", "workload": "dynamic_service", "name": "conf-" + newKey("q")[2:12]}},
	})
	before := time.Now()
	x, err := r.do(ctx, p, "POST", "/v1/quotes", r.authed(newKey("quote")), body)
	if err != nil {
		return err
	}
	if err := success(x, 201); err != nil {
		return err
	}
	var env struct {
		Data struct {
			QuoteID       string     `json:"quoteId"`
			Decision      string     `json:"decision"`
			HoldExpiresAt *time.Time `json:"holdExpiresAt"`
		} `json:"data"`
	}
	_ = json.Unmarshal(x.body, &env)
	if env.Data.Decision != "ALLOW" {
		return errSkip{fmt.Sprintf("the quote decided %s, so no hold could be checked", env.Data.Decision)}
	}
	if env.Data.HoldExpiresAt == nil {
		return fmt.Errorf("an ALLOW quote holds no budget")
	}
	if d := env.Data.HoldExpiresAt.Sub(before); d < 14*time.Minute || d > 16*time.Minute {
		return fmt.Errorf("the hold lasts %v, want 15 minutes", d.Round(time.Second))
	}
	x, err = r.do(ctx, p, "POST", "/v1/quotes/"+env.Data.QuoteID+"/release", r.authed(newKey("release")), nil)
	if err != nil {
		return err
	}
	if x.status != 200 && x.status != 201 {
		return fmt.Errorf("release answered %d: %.200s", x.status, x.body)
	}
	return nil
}

// waitTask polls a task until it leaves queued and running, or the
// context ends.
func (r *runner) waitTask(ctx context.Context, p *probeRun, taskID string, until ...string) (map[string]any, error) {
	for {
		x, err := r.do(ctx, p, "GET", "/v1/tasks/"+taskID, r.authed(""), nil)
		if err != nil {
			return nil, err
		}
		if x.status != 200 {
			return nil, fmt.Errorf("get_task answered %d: %.200s", x.status, x.body)
		}
		data, _ := x.json()["data"].(map[string]any)
		state, _ := data["state"].(string)
		for _, u := range until {
			if state == u {
				return data, nil
			}
		}
		if state != "queued" && state != "running" {
			return data, fmt.Errorf("task %s ended %s", taskID, state)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("task %s still %s: %w", taskID, state, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// runTask starts a task with a POST that must answer 202 (op names the
// operation in errors) and waits until it reaches one of the states.
func (r *runner) runTask(ctx context.Context, p *probeRun, op, path, key string, body []byte, until ...string) (map[string]any, error) {
	x, err := r.do(ctx, p, "POST", path, r.authed(newKey(key)), body)
	if err != nil {
		return nil, err
	}
	if err := success(x, 202); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	data, _ := x.json()["data"].(map[string]any)
	taskID, _ := data["taskId"].(string)
	return r.waitTask(ctx, p, taskID, until...)
}

func probeLaunchTeardown(ctx context.Context, r *runner, p *probeRun) error {
	if err := r.needProject(ctx, p); err != nil {
		return err
	}
	page := []byte("<!doctype html><title>conformance</title><p>pier conformance probe</p>\n")
	body, _ := json.Marshal(map[string]any{
		"projectId": r.project,
		"files":     []map[string]any{{"path": "index.html", "contentBase64": base64.StdEncoding.EncodeToString(page)}},
	})
	x, err := r.do(ctx, p, "POST", "/v1/bundles", r.authed(newKey("bundle")), body)
	if err != nil {
		return err
	}
	if err := success(x, 201); err != nil {
		return fmt.Errorf("upload_assets: %w", err)
	}
	bundle, _ := x.json()["data"].(map[string]any)["bundleId"].(string)
	name := "conf-" + newKey("s")[2:12]
	body, _ = json.Marshal(map[string]any{"name": name, "target": "edge", "bundleId": bundle})
	done, err := r.runTask(ctx, p, "launch_service", "/v1/projects/"+r.project+"/launch", "launch", body, "succeeded")
	if err != nil {
		return err
	}
	serviceID, _ := done["serviceId"].(string)
	if serviceID == "" {
		return fmt.Errorf("the finished launch names no service")
	}
	if preview, _ := done["previewUrl"].(string); preview == "" {
		return fmt.Errorf("the finished launch has no preview URL")
	}
	if done["receipt"] == nil {
		return fmt.Errorf("the finished launch yields no receipt")
	}
	r.left("service %s (%s), being torn down", serviceID, name)
	_, err = r.runTask(ctx, p, "teardown_service", "/v1/services/"+serviceID+"/teardown", "teardown", nil, "succeeded")
	return err
}

func probeGate(ctx context.Context, r *runner, p *probeRun) error {
	if err := r.needProject(ctx, p); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"amountUsd": 1, "reason": "conformance probe: a raise a human must decide"})
	task, err := r.runTask(ctx, p, "request_budget_raise", "/v1/projects/"+r.project+"/budget-raises", "raise", body, "input_required")
	if err != nil {
		return err
	}
	taskID, _ := task["taskId"].(string)
	u, _ := task["approvalUrl"].(string)
	if u == "" {
		return fmt.Errorf("an input_required task surfaces no approval URL")
	}
	r.left("a 1 USD budget raise, task %s, waiting for a human at %s", taskID, u)
	return nil
}

func probeHolderRefusesAgent(ctx context.Context, r *runner, p *probeRun) error {
	sb, err := r.sandboxSession(ctx, p)
	if err != nil {
		return err
	}
	for _, h := range []http.Header{r.authed(""), {"Authorization": {sb.authorization}}} {
		x, err := r.do(ctx, p, "POST", "/v1/sandbox/sessions/"+sb.id+"/mandate", h, []byte(`{"mandate":"a.b.c"}`))
		if err != nil {
			return err
		}
		if err := expectError(x, 403, "auth:agent_authority_refused"); err != nil {
			return fmt.Errorf("mandate with agent authority: %w", err)
		}
		x, err = r.do(ctx, p, "POST", "/v1/sandbox/sessions/"+sb.id+"/gates/gat_conformance/decision", h, []byte(`{"decision":"a.b.c"}`))
		if err != nil {
			return err
		}
		if err := expectError(x, 403, "auth:agent_authority_refused"); err != nil {
			return fmt.Errorf("decision with agent authority: %w", err)
		}
	}
	return nil
}

func probeSandboxMandate(ctx context.Context, r *runner, p *probeRun) error {
	sb, err := r.sandboxSession(ctx, p)
	if err != nil {
		return err
	}
	if err := sb.registerMandate(ctx, r, p); err != nil {
		return err
	}
	x, err := sb.attempt(ctx, r, p, "allowed", newKey("attempt"))
	if err != nil {
		return err
	}
	if x.status != 201 {
		return fmt.Errorf("allowed attempt answered %d: %.200s", x.status, x.body)
	}
	x, err = sb.attempt(ctx, r, p, "approval", newKey("attempt"))
	if err != nil {
		return err
	}
	if x.status != 201 {
		return fmt.Errorf("approval attempt answered %d: %.200s", x.status, x.body)
	}
	var ar struct {
		Data struct {
			Attempt struct{ Outcome string }
			Gate    holder.Gate
		}
	}
	_ = json.Unmarshal(x.body, &ar)
	if ar.Data.Attempt.Outcome != "gated" || ar.Data.Gate.ID == "" {
		return fmt.Errorf("an approval attempt opened no gate: %.200s", x.body)
	}
	decision, err := holder.SignDecision(sb.key, sb.id, ar.Data.Gate, holder.Approve)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"decision": decision})
	x, err = r.do(ctx, p, "POST", "/v1/sandbox/sessions/"+sb.id+"/gates/"+ar.Data.Gate.ID+"/decision", http.Header{"Idempotency-Key": {newKey("decision")}}, body)
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("the holder's decision answered %d: %.200s", x.status, x.body)
	}
	proofID, _ := x.json()["data"].(map[string]any)["proofId"].(string)
	if proofID == "" {
		return fmt.Errorf("an approved gate yields no proof")
	}
	x, err = r.do(ctx, p, "GET", "/v1/sandbox/proofs/"+proofID, nil, nil)
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("the proof answered %d", x.status)
	}
	return nil
}

// sandbox is a session the runner drives as agent and simulated holder.
type sandbox struct {
	id, authorization string
	// registration is the secret the holder needs to register the
	// mandate, when the deployment issues one.
	registration string
	key          *holder.Key
}

func (r *runner) sandboxSession(ctx context.Context, p *probeRun) (*sandbox, error) {
	x, err := r.do(ctx, p, "POST", "/v1/sandbox/sessions", nil, []byte(`{}`))
	if err != nil {
		return nil, err
	}
	if x.status != 201 {
		return nil, fmt.Errorf("create_sandbox_session answered %d: %.200s", x.status, x.body)
	}
	var env struct {
		Data struct {
			AuthorizationHeader string `json:"authorizationHeader"`
			RegistrationSecret  string `json:"registrationSecret"`
			Session             struct {
				ID        string `json:"id"`
				SessionID string `json:"sessionId"`
			} `json:"session"`
		} `json:"data"`
	}
	_ = json.Unmarshal(x.body, &env)
	id := or(env.Data.Session.SessionID, env.Data.Session.ID)
	if id == "" || env.Data.AuthorizationHeader == "" {
		return nil, fmt.Errorf("the session answer lacks its id or authorization: %.200s", x.body)
	}
	key, err := holder.GenerateKey()
	if err != nil {
		return nil, err
	}
	return &sandbox{id: id, authorization: env.Data.AuthorizationHeader, registration: env.Data.RegistrationSecret, key: key}, nil
}

func (sb *sandbox) registerMandate(ctx context.Context, r *runner, p *probeRun) error {
	hc := &holder.Client{HTTPClient: r.o.HTTPClient}
	issuer, err := hc.FetchIssuerKey(ctx, r.base)
	if err != nil {
		return err
	}
	m, err := holder.NewMandate(sb.id, issuer.KID, time.Now())
	if err != nil {
		return err
	}
	mandate, err := holder.SignMandate(sb.key, m)
	if err != nil {
		return err
	}
	req := map[string]string{"mandate": mandate}
	if sb.registration != "" {
		req["registrationSecret"] = sb.registration
	}
	body, _ := json.Marshal(req)
	x, err := r.do(ctx, p, "POST", "/v1/sandbox/sessions/"+sb.id+"/mandate", http.Header{"Idempotency-Key": {newKey("mandate")}}, body)
	if err != nil {
		return err
	}
	if x.status != 201 {
		return fmt.Errorf("register_sandbox_mandate answered %d: %.200s", x.status, x.body)
	}
	return nil
}

func (sb *sandbox) attempt(ctx context.Context, r *runner, p *probeRun, scenario, key string) (*response, error) {
	body, _ := json.Marshal(map[string]string{"scenario": scenario})
	return r.do(ctx, p, "POST", "/v1/sandbox/sessions/"+sb.id+"/attempts", http.Header{"Authorization": {sb.authorization}, "Idempotency-Key": {key}}, body)
}
