package holder_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/internal/lib/sandboxproof"
)

// sandbox is a small in-process stand-in for the server's holder endpoints.
// It checks what it receives with the server's own code and records every
// request, so tests can assert on headers.
type sandbox struct {
	t        *testing.T
	issuer   *sandboxproof.SigningKey
	session  string
	now      time.Time
	mu       sync.Mutex
	requests []*http.Request
	mandate  *sandboxproof.Mandate
	gate     *sandboxproof.Gate
	decided  *sandboxproof.Decision
}

func newSandbox(t *testing.T) (*sandbox, *httptest.Server) {
	issuer, err := sandboxproof.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	sb := &sandbox{t: t, issuer: issuer, session: "sbs_httpTest0001", now: time.Now()}
	jwks, err := sandboxproof.PublicJWKS(issuer)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /reference/sandbox/issuer-jwks.json", func(w http.ResponseWriter, r *http.Request) {
		sb.record(r)
		w.Write(jwks)
	})
	mux.HandleFunc("POST /v1/sandbox/sessions/{id}/mandate", func(w http.ResponseWriter, r *http.Request) {
		sb.record(r)
		var body struct{ Mandate, RegistrationSecret string }
		if !sb.holderRequest(w, r, &body) {
			return
		}
		if body.RegistrationSecret != testRegistration {
			refuse(w, http.StatusUnauthorized, "auth:invalid_credentials", "not this session's registration secret")
			return
		}
		m, err := sandboxproof.VerifyMandate(body.Mandate, sandboxproof.MandateCheck{SessionID: r.PathValue("id"), IssuerKID: issuer.KID, Now: sb.now})
		if err != nil {
			refuse(w, http.StatusUnprocessableEntity, "input:mandate", err.Error())
			return
		}
		sb.mu.Lock()
		sb.mandate = m
		sb.mu.Unlock()
		ok(w, map[string]any{"session": map[string]any{"id": sb.session}})
	})
	mux.HandleFunc("POST /v1/sandbox/sessions/{id}/gates/{gate}/decision", func(w http.ResponseWriter, r *http.Request) {
		sb.record(r)
		var body struct{ Decision string }
		if !sb.holderRequest(w, r, &body) {
			return
		}
		sb.mu.Lock()
		defer sb.mu.Unlock()
		if sb.gate == nil || sb.gate.ID != r.PathValue("gate") || sb.mandate == nil {
			refuse(w, http.StatusNotFound, "not_found:gate", "no such gate")
			return
		}
		if sb.decided != nil {
			refuse(w, http.StatusConflict, "conflict:gate_decided", "the gate is already decided")
			return
		}
		d, err := sandboxproof.VerifyDecision(body.Decision, sandboxproof.DecisionCheck{
			SessionID: r.PathValue("id"), Gate: *sb.gate, HolderThumbprint: sb.mandate.HolderThumbprint, Now: sb.now,
		})
		if err != nil {
			refuse(w, http.StatusUnprocessableEntity, "input:decision", err.Error())
			return
		}
		sb.decided = d
		ok(w, map[string]any{"gate": map[string]any{"id": sb.gate.ID, "decidedOutcome": d.Outcome}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return sb, srv
}

// openGate opens a gate the way an approval attempt does.
func (sb *sandbox) openGate() sandboxproof.Gate {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	gp, err := sandboxproof.NewGateParams(sb.now)
	if err != nil {
		sb.t.Fatal(err)
	}
	_, gate, err := sandboxproof.IssueAttempt(sb.issuer, sandboxproof.AttemptRequest{
		SessionID: sb.session, AttemptID: "sba_httpTest0001", Scenario: sandboxproof.ScenarioApproval,
		AmountMicroUSD: sandboxproof.ApprovalAmountMicroUSD, Mandate: sb.mandate.JWS,
	}, sb.now, &gp)
	if err != nil {
		sb.t.Fatal(err)
	}
	sb.gate = gate
	return *gate
}

func (sb *sandbox) record(r *http.Request) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.requests = append(sb.requests, r.Clone(context.Background()))
}

// holderRequest enforces the holder rules: no agent authority, JSON body, an
// Idempotency-Key that is the digest of the signature posted.
func (sb *sandbox) holderRequest(w http.ResponseWriter, r *http.Request, body any) bool {
	if r.Header.Get("Authorization") != "" {
		refuse(w, http.StatusForbidden, "auth:agent_authority_refused", "holder endpoints take no Authorization")
		return false
	}
	if r.Header.Get("Content-Type") != "application/json" {
		refuse(w, http.StatusUnsupportedMediaType, "input:content_type", "want application/json")
		return false
	}
	if err := json.NewDecoder(r.Body).Decode(body); err != nil {
		refuse(w, http.StatusBadRequest, "input:body", err.Error())
		return false
	}
	var jws string
	switch b := body.(type) {
	case *struct{ Mandate, RegistrationSecret string }:
		jws = b.Mandate
	case *struct{ Decision string }:
		jws = b.Decision
	}
	sum := sha256.Sum256([]byte(jws))
	if r.Header.Get("Idempotency-Key") != hex.EncodeToString(sum[:]) {
		refuse(w, http.StatusBadRequest, "input:idempotency_key", "Idempotency-Key is not the JWS digest")
		return false
	}
	return true
}

func ok(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"data": data, "actions": []any{map[string]any{"kind": "stop", "reason": "done"}}, "formatVersion": "1"})
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"blockedBy": code, "message": msg, "retryable": false, "actions": []any{map[string]any{"kind": "stop", "reason": code}}})
}

func TestHolderFlowSendsNoAuthorization(t *testing.T) {
	sb, srv := newSandbox(t)
	ctx := context.Background()
	k, _ := holder.GenerateKey()

	issuer, err := holder.FetchIssuerKey(ctx, srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	if issuer.KID != sb.issuer.KID {
		t.Fatalf("issuer kid %q, want %q", issuer.KID, sb.issuer.KID)
	}
	m, _ := holder.NewMandate(sb.session, issuer.KID, sb.now)
	mandate, _ := holder.SignMandate(k, m)
	resp, err := holder.RegisterMandate(ctx, srv.URL, sb.session, testRegistration, mandate)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(resp.Data) == 0 || len(resp.Actions) == 0 {
		t.Fatalf("unexpected response %+v", resp)
	}

	gate := sb.openGate()
	decision, _ := holder.SignDecision(k, sb.session, holderGate(gate), holder.Approve)
	if _, err := holder.PostDecision(ctx, srv.URL, sb.session, gate.ID, decision); err != nil {
		t.Fatal(err)
	}
	if sb.decided == nil || sb.decided.Outcome != holder.Approve {
		t.Fatal("the sandbox did not record the approval")
	}

	// The first valid decision wins; a second is refused with the sandbox's
	// error envelope.
	deny, _ := holder.SignDecision(k, sb.session, holderGate(gate), holder.Deny)
	_, err = holder.PostDecision(ctx, srv.URL, sb.session, gate.ID, deny)
	var apiErr *holder.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.BlockedBy != "conflict:gate_decided" {
		t.Fatalf("second decision: got %v, want a 409 conflict:gate_decided", err)
	}

	if len(sb.requests) != 4 {
		t.Fatalf("sandbox saw %d requests, want 4", len(sb.requests))
	}
	for _, r := range sb.requests {
		if v := r.Header.Get("Authorization"); v != "" {
			t.Errorf("%s %s carried Authorization %q", r.Method, r.URL.Path, v)
		}
	}
}

// testRegistration is the fake sandbox's registration secret.
const testRegistration = "sbr_test"

func TestRegisterMandateReportsRefusal(t *testing.T) {
	sb, srv := newSandbox(t)
	k, _ := holder.GenerateKey()
	m, _ := holder.NewMandate(sb.session, "not-the-issuer", sb.now)
	mandate, _ := holder.SignMandate(k, m)
	_, err := holder.RegisterMandate(context.Background(), srv.URL, sb.session, testRegistration, mandate)
	var apiErr *holder.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity || apiErr.BlockedBy != "input:mandate" {
		t.Fatalf("got %v, want the sandbox's input:mandate refusal", err)
	}
}

func TestFetchIssuerKeyRefusesBadSets(t *testing.T) {
	for name, body := range map[string]string{
		"empty":       `{"keys":[]}`,
		"no kid":      `{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`,
		"private key": `{"keys":[{"kid":"k","kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","d":"jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"}]}`,
		"not JSON":    `{`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) }))
		if _, err := holder.FetchIssuerKey(context.Background(), srv.URL); err == nil {
			t.Errorf("%s: accepted", name)
		}
		srv.Close()
	}
}
