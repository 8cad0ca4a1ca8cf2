package sandbox

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/models"
)

// Step ids that actions name in their after lists.
const (
	stepFetchIssuerKey  = "fetch_issuer_key"
	stepRegisterMandate = "register_mandate"
	stepAttempt         = "attempt"
	stepDecide          = "decide_gate"
	stepReadProof       = "read_proof"
	stepReadSession     = "read_session"
	stepCreateSession   = "create_session"
)

// links builds the raw HTTP requests the sandbox protocol asks of each
// party, as typed request actions.
type links struct{ base string }

func (s *Service) links() links {
	if s.baseURL == nil {
		return links{}
	}
	return links{strings.TrimRight(s.baseURL(), "/")}
}

func (l links) sessionURL(id string) string {
	return l.base + "/v1/sandbox/sessions/" + url.PathEscape(id)
}

func request(id string, actor models.Actor, method models.RequestActionMethod, u string, required, forbidden, after []string) models.RequestAction {
	r := models.RequestAction{Kind: "request", Id: &id, Actor: actor, Method: method, Url: u}
	if len(required) > 0 {
		r.RequiredHeaders = &required
	}
	if len(forbidden) > 0 {
		r.ForbiddenHeaders = &forbidden
	}
	if len(after) > 0 {
		r.After = &after
	}
	return r
}

// The holder reads the published issuer key, the mandate's audience.
func (l links) fetchIssuerKey() models.RequestAction {
	return request(stepFetchIssuerKey, "holder", "GET", l.base+sandboxproof.PathIssuerJWKS, nil, nil, nil)
}

// The holder registers the signed mandate with the session id and the
// registration secret the session's creator handed over: never with the
// agent capability.
func (l links) registerMandate(id string) models.RequestAction {
	return request(stepRegisterMandate, "holder", "POST", l.sessionURL(id)+"/mandate",
		[]string{"Content-Type", "Idempotency-Key"}, []string{"Authorization"}, []string{stepFetchIssuerKey})
}

// The agent attempts a fake charge with its capability.
func (l links) attempt(id string) models.RequestAction {
	return request(stepAttempt, "agent", "POST", l.sessionURL(id)+"/attempts",
		[]string{"Authorization", "Content-Type", "Idempotency-Key"}, nil, []string{stepRegisterMandate})
}

// The holder signs the gate and posts the decision without agent authority.
func (l links) decide(id, gateID string) models.RequestAction {
	return request(stepDecide, "holder", "POST", l.sessionURL(id)+"/gates/"+url.PathEscape(gateID)+"/decision",
		[]string{"Content-Type", "Idempotency-Key"}, []string{"Authorization"}, []string{stepAttempt})
}

func (l links) readProof(proofID string) models.RequestAction {
	return request(stepReadProof, "auditor", "GET", l.base+"/v1/sandbox/proofs/"+url.PathEscape(proofID), nil, nil, nil)
}

// Anyone may open a session of their own.
func (l links) createSession() models.RequestAction {
	return request(stepCreateSession, "agent", "POST", l.base+"/v1/sandbox/sessions", nil, nil, nil)
}

func (l links) readSession(id string) models.RequestAction {
	return request(stepReadSession, "agent", "GET", l.sessionURL(id), nil, nil, nil)
}

func stop(reason models.StopActionReason) models.StopAction {
	return models.StopAction{Kind: "stop", Reason: reason}
}

// asActions wraps request and stop actions in the envelope's action union.
func asActions(steps ...any) []models.Action {
	out := make([]models.Action, 0, len(steps))
	for _, s := range steps {
		var a models.Action
		mustWrap(s, &a)
		out = append(out, a)
	}
	return out
}

// asSandboxActions wraps them in the sandbox's own union (request or stop).
func asSandboxActions(steps ...any) []models.SandboxAction {
	out := make([]models.SandboxAction, 0, len(steps))
	for _, s := range steps {
		var a models.SandboxAction
		mustWrap(s, &a)
		out = append(out, a)
	}
	return out
}

func mustWrap(v any, into json.Unmarshaler) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if err := into.UnmarshalJSON(b); err != nil {
		panic(err)
	}
}
