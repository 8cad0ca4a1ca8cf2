package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/httpheader"
	"github.com/pierhq/pier/server/internal/sandbox"
	"github.com/pierhq/pier/server/internal/service"
)

// requestKey carries the HTTP request into operations that read a header
// the contract does not model as a parameter: the sandbox capability in
// Authorization, and If-None-Match on the release files.
type requestKey struct{}

func withRequest(f api.StrictHandlerFunc, _ string) api.StrictHandlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
		return f(context.WithValue(ctx, requestKey{}, r), w, r, request)
	}
}

func requestFrom(ctx context.Context) *http.Request {
	r, _ := ctx.Value(requestKey{}).(*http.Request)
	return r
}

type rawJSON []byte

func (b rawJSON) VisitGetSandboxProofResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(b)
	return err
}

// The release files are served as stored, byte for byte: their hashes are
// what the manifest publishes.

// staticFile writes a release file with its SHA-256 as a strong ETag. Files
// of a published release never change and are cached as immutable; the
// manifest, and the scripts while the release is pending, are revalidated
// on every use.
type staticFile struct {
	sandbox.File
	r *http.Request
}

func (f staticFile) write(w http.ResponseWriter) error {
	h := w.Header()
	etag := `"` + f.SHA256 + `"`
	h.Set("ETag", etag)
	h.Set("Content-Type", f.ContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Access-Control-Allow-Origin", "*")
	if f.Published {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if f.r != nil && httpheader.ETagMatches(f.r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	h.Set("Content-Length", strconv.Itoa(len(f.Body)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(f.Body)
	return err
}

func (f staticFile) VisitGetSandboxReferenceResponse(w http.ResponseWriter) error { return f.write(w) }
func (f staticFile) VisitGetReferenceProofResponse(w http.ResponseWriter) error   { return f.write(w) }
func (f staticFile) VisitGetReferenceProofJwksResponse(w http.ResponseWriter) error {
	return f.write(w)
}
func (f staticFile) VisitGetReferenceIssuerJwksResponse(w http.ResponseWriter) error {
	return f.write(w)
}
func (f staticFile) VisitGetReferenceProvenanceResponse(w http.ResponseWriter) error {
	return f.write(w)
}
func (f staticFile) VisitGetVerifierScriptResponse(w http.ResponseWriter) error { return f.write(w) }
func (f staticFile) VisitGetHolderScriptResponse(w http.ResponseWriter) error   { return f.write(w) }

func (o sandboxRoutes) sandbox(op string) (*sandbox.Service, error) {
	if o.cfg.Sandbox == nil {
		return nil, notImplemented(op)
	}
	return o.cfg.Sandbox, nil
}

func (o sandboxRoutes) CreateSandboxSession(ctx context.Context, _ api.CreateSandboxSessionRequestObject) (api.CreateSandboxSessionResponseObject, error) {
	sb, err := o.sandbox("create_sandbox_session")
	if err != nil {
		return nil, err
	}
	c, err := sb.CreateSession(ctx)
	if err != nil {
		return nil, err
	}
	return api.CreateSandboxSession201JSONResponse{
		Data: models.SandboxSessionCreated{
			Session:             c.Session,
			AuthorizationHeader: c.AuthorizationHeader(),
			AgentCapability:     c.Capability,
			RegistrationSecret:  c.RegistrationSecret,
			Actions:             c.Steps,
		},
		Actions:       c.Actions,
		FormatVersion: FormatVersion,
	}, nil
}

// sandboxRead reads through the sandbox service, or refuses op when the
// server has none.
func sandboxRead[T any](o sandboxRoutes, op string, read func(*sandbox.Service) (T, []models.Action, error)) (T, []models.Action, error) {
	sb, err := o.sandbox(op)
	if err != nil {
		var zero T
		return zero, nil, err
	}
	return read(sb)
}

func (o sandboxRoutes) GetSandboxSession(ctx context.Context, req api.GetSandboxSessionRequestObject) (api.GetSandboxSessionResponseObject, error) {
	s, next, err := sandboxRead(o, "get_sandbox_session", func(sb *sandbox.Service) (models.SandboxSession, []models.Action, error) {
		return sb.Session(ctx, req.Id)
	})
	if err != nil {
		return nil, err
	}
	return api.GetSandboxSession200JSONResponse{Data: models.SandboxSessionRead{Session: s}, Actions: next, FormatVersion: FormatVersion}, nil
}

// RegisterSandboxMandate is a holder operation: the middleware has already
// refused any request carrying an Authorization header.
func (o sandboxRoutes) RegisterSandboxMandate(ctx context.Context, req api.RegisterSandboxMandateRequestObject) (api.RegisterSandboxMandateResponseObject, error) {
	sb, err := o.sandbox("register_sandbox_mandate")
	if err != nil {
		return nil, err
	}
	m, err := sb.RegisterMandate(ctx, req.Id, req.Body.Mandate, req.Body.RegistrationSecret)
	if err != nil {
		return nil, err
	}
	mr := mutation(o.svc.Now(), "register_sandbox_mandate", nil,
		[]models.ResourceRef{{Type: "sandbox_mandate", Id: m.SessionID}}, nil, m.BudgetRemaining)
	return api.RegisterSandboxMandate201JSONResponse{
		Data: models.MandateRegistered{
			SessionId: m.SessionID, Mandate: m.Mandate,
			Receipt: mr.Receipt, Undo: mr.Undo, BudgetRemainingUsd: mr.BudgetRemainingUsd,
		},
		Actions:       m.Actions,
		FormatVersion: FormatVersion,
	}, nil
}

// CreateSandboxAttempt takes sandbox_agent authority: the middleware only
// requires an Authorization header, and the service checks it against the
// session's stored capability.
func (o sandboxRoutes) CreateSandboxAttempt(ctx context.Context, req api.CreateSandboxAttemptRequestObject) (api.CreateSandboxAttemptResponseObject, error) {
	sb, err := o.sandbox("create_sandbox_attempt")
	if err != nil {
		return nil, err
	}
	authorization := ""
	if r := requestFrom(ctx); r != nil {
		authorization = r.Header.Get("Authorization")
	}
	a, err := sb.Attempt(ctx, req.Id, authorization, string(req.Body.Scenario))
	if err != nil {
		return nil, err
	}
	item := "sandbox fake charge"
	created := []models.ResourceRef{{Type: "sandbox_attempt", Id: a.Attempt.AttemptId}}
	if a.Gate != nil {
		item = "sandbox fake charge held for the holder's approval"
		created = append(created, models.ResourceRef{Type: "sandbox_gate", Id: a.Gate.Id})
	}
	if a.ProofID != "" {
		created = append(created, models.ResourceRef{Type: "sandbox_proof", Id: a.ProofID})
	}
	mr := mutation(o.svc.Now(), "create_sandbox_attempt", []service.Cost{{Item: item, Amount: a.Amount}}, created, nil, a.BudgetRemaining)
	var proofID *string
	if a.ProofID != "" {
		proofID = &a.ProofID
	}
	return api.CreateSandboxAttempt201JSONResponse{
		Data: models.SandboxAttemptResult{
			SessionId: a.SessionID, Attempt: a.Attempt, Gate: a.Gate, ProofId: proofID,
			Receipt: mr.Receipt, Undo: mr.Undo, BudgetRemainingUsd: mr.BudgetRemainingUsd,
		},
		Actions:       a.Actions,
		FormatVersion: FormatVersion,
	}, nil
}

// DecideSandboxGate is a holder operation: the middleware has already
// refused any request carrying an Authorization header, and the decision's
// signature is the only authority.
func (o sandboxRoutes) DecideSandboxGate(ctx context.Context, req api.DecideSandboxGateRequestObject) (api.DecideSandboxGateResponseObject, error) {
	sb, err := o.sandbox("decide_sandbox_gate")
	if err != nil {
		return nil, err
	}
	d, err := sb.Decide(ctx, req.Id, req.GateId, req.Body.Decision)
	if err != nil {
		return nil, err
	}
	var created []models.ResourceRef
	var proofID *string
	if d.ProofID != "" {
		created = append(created, models.ResourceRef{Type: "sandbox_proof", Id: d.ProofID})
		proofID = &d.ProofID
	}
	mr := mutation(o.svc.Now(), "decide_sandbox_gate", nil, created, nil, d.BudgetRemaining)
	return api.DecideSandboxGate200JSONResponse{
		Data: models.GateDecided{
			SessionId: d.SessionID, Gate: d.Gate, ProofId: proofID,
			Receipt: mr.Receipt, Undo: mr.Undo, BudgetRemainingUsd: mr.BudgetRemainingUsd,
		},
		Actions:       d.Actions,
		FormatVersion: FormatVersion,
	}, nil
}

// GetSandboxProof answers {data: <proof>} with the proof's bytes exactly as
// minted, so that data is the very object /reference/sandbox/proof.json
// serves.
func (o sandboxRoutes) GetSandboxProof(ctx context.Context, req api.GetSandboxProofRequestObject) (api.GetSandboxProofResponseObject, error) {
	proof, next, err := sandboxRead(o, "get_sandbox_proof", func(sb *sandbox.Service) ([]byte, []models.Action, error) {
		return sb.Proof(ctx, req.ProofId)
	})
	if err != nil {
		return nil, err
	}
	body, err := sandbox.ProofEnvelope(proof, next)
	if err != nil {
		return nil, err
	}
	return rawJSON(body), nil
}

func (o sandboxRoutes) referenceFile(ctx context.Context, op, path string) (staticFile, error) {
	sb, err := o.sandbox(op)
	if err != nil {
		return staticFile{}, err
	}
	f, err := sb.ReferenceFile(ctx, path)
	if err != nil {
		return staticFile{}, err
	}
	return staticFile{File: f, r: requestFrom(ctx)}, nil
}

func (o sandboxRoutes) GetSandboxReference(ctx context.Context, _ api.GetSandboxReferenceRequestObject) (api.GetSandboxReferenceResponseObject, error) {
	return o.referenceFile(ctx, "get_sandbox_reference", sandboxproof.PathManifest)
}

func (o sandboxRoutes) GetReferenceProof(ctx context.Context, _ api.GetReferenceProofRequestObject) (api.GetReferenceProofResponseObject, error) {
	return o.referenceFile(ctx, "get_reference_proof", sandboxproof.PathProof)
}

func (o sandboxRoutes) GetReferenceProofJwks(ctx context.Context, _ api.GetReferenceProofJwksRequestObject) (api.GetReferenceProofJwksResponseObject, error) {
	return o.referenceFile(ctx, "get_reference_proof_jwks", sandboxproof.PathProofJWKS)
}

func (o sandboxRoutes) GetReferenceIssuerJwks(ctx context.Context, _ api.GetReferenceIssuerJwksRequestObject) (api.GetReferenceIssuerJwksResponseObject, error) {
	return o.referenceFile(ctx, "get_reference_issuer_jwks", sandboxproof.PathIssuerJWKS)
}

func (o sandboxRoutes) GetReferenceProvenance(ctx context.Context, _ api.GetReferenceProvenanceRequestObject) (api.GetReferenceProvenanceResponseObject, error) {
	return o.referenceFile(ctx, "get_reference_provenance", sandboxproof.PathProvenance)
}

func (o sandboxRoutes) GetVerifierScript(ctx context.Context, _ api.GetVerifierScriptRequestObject) (api.GetVerifierScriptResponseObject, error) {
	return o.referenceFile(ctx, "get_verifier_script", sandboxproof.PathVerifierMJS)
}

func (o sandboxRoutes) GetHolderScript(ctx context.Context, _ api.GetHolderScriptRequestObject) (api.GetHolderScriptResponseObject, error) {
	return o.referenceFile(ctx, "get_holder_script", sandboxproof.PathHolderMJS)
}
