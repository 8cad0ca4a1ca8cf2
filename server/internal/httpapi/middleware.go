package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/gowebpki/jcs"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/clientaddr"
	"github.com/pierhq/pier/server/internal/httpheader"
	"github.com/pierhq/pier/server/internal/oauth"
	"github.com/pierhq/pier/server/internal/operation"
	"github.com/pierhq/pier/server/internal/safetext"
	"github.com/pierhq/pier/server/internal/store"
)

// chain runs the shared machinery in order: negotiation, body, identity,
// rate limit, validation, idempotency, then the operation itself.
func (h *Handler) chain(rt *route) http.Handler {
	op := rt.op
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !acceptableAny(r.Header.Get("Accept"), rt.medias) {
			WriteError(w, r, h.cfg.Log, apierr.Newf("input:not_acceptable", "this operation answers with %s; send Accept: %s", responseMedia(rt), responseMedia(rt)))
			return
		}

		// Nothing of the body is read before the caller is known and the
		// route's limit is checked: an announced length over the limit is
		// refused at once, and an unauthenticated upload never reaches memory.
		if limit := h.bodyLimit(rt, r); r.ContentLength > limit {
			WriteError(w, r, h.cfg.Log, tooLarge(op, limit))
			return
		}
		p, err := h.authenticate(r, op)
		if err != nil {
			WriteError(w, r, h.cfg.Log, err)
			return
		}
		ctx := auth.WithPrincipal(r.Context(), p)
		r = r.WithContext(ctx)

		if d, limited := h.cfg.Limiter.Allow(op.RateLimit, p.Caller); limited {
			limit, policy := d.Headers()
			// As Header.Set stores them, without canonicalising the names
			// on every request.
			w.Header()["Ratelimit"] = []string{limit}
			w.Header()["Ratelimit-Policy"] = []string{policy}
			if !d.Allowed {
				WriteError(w, r, h.cfg.Log, rateLimited(op.ID, d))
				return
			}
		}

		if rt.manifest && r.Body != nil && r.Body != http.NoBody {
			h.serveManifest(w, r, rt, p)
			return
		}
		body, err := h.readBody(w, r, rt)
		if err != nil {
			WriteError(w, r, h.cfg.Log, err)
			return
		}
		text := body
		if isRaw(r) {
			// Raw content is bytes, not text: only the path and query are
			// checked.
			text = nil
		}
		if err := checkText(r, text); err != nil {
			WriteError(w, r, h.cfg.Log, err)
			return
		}

		if op.Pure || rt.version != nil {
			h.servePure(w, r, rt, body)
			return
		}

		if rt.acceptsFast == nil || !rt.acceptsFast(r, body) {
			if err := h.validate(r, rt); err != nil {
				WriteError(w, r, h.cfg.Log, err)
				return
			}
		}

		key := r.Header.Get("Idempotency-Key")
		if !op.Idempotent || key == "" {
			h.inner.ServeHTTP(w, r)
			return
		}
		h.idempotent(w, r, op, p, key, requestHash(r, body), nil)
	})
}

// servePure answers a pure or versioned operation from the cache, or
// validates and runs it and keeps a successful answer.
func (h *Handler) servePure(w http.ResponseWriter, r *http.Request, rt *route, body []byte) {
	key := pureKey(rt.op.ID, r.URL.RawQuery, body)
	k, version, ok, _ := h.kept(rt, key)
	if ok {
		// As Header.Set stores them. The length is set so that a large
		// answer is not chunked, and is sent the same way by the
		// listener's fast path (AnswerKept).
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(k.body))}
		w.Header()["Content-Type"] = []string{"application/json"}
		w.WriteHeader(http.StatusOK)
		w.Write(k.body)
		return
	}
	if err := h.validate(r, rt); err != nil {
		WriteError(w, r, h.cfg.Log, err)
		return
	}
	rec := &Recorder{header: http.Header{}}
	h.inner.ServeHTTP(rec, r)
	if rec.status == http.StatusOK {
		h.pure.put(key, kept{body: bytes.Clone(rec.body.Bytes()), version: version, at: h.cfg.Now()})
		// Sent as the kept answer will be.
		rec.header["Content-Length"] = []string{strconv.Itoa(rec.body.Len())}
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

// versionedMaxAge bounds how long a versioned answer is kept whatever its
// version: a write through another replica bumps that replica's version,
// not this one's.
const versionedMaxAge = time.Second

func (h *Handler) baseURL() string {
	if h.cfg.BaseURL == nil {
		return ""
	}
	return h.cfg.BaseURL()
}

// responseMedia is the media type an operation answers with: JSON when it
// offers JSON among others (get_service_logs also streams NDJSON).
func responseMedia(rt *route) string {
	media := rt.medias
	if len(media) == 0 || slices.Contains(media, "application/json") {
		return "application/json"
	}
	return media[0]
}

func responseMedias(rt *route) []string {
	var out []string
	for code, resp := range rt.operation.Responses.Map() {
		if strings.HasPrefix(code, "2") && resp.Value != nil {
			for media := range resp.Value.Content {
				out = append(out, media)
			}
		}
	}
	slices.Sort(out)
	return out
}

// acceptableAny reports whether an Accept header admits one of media.
func acceptableAny(accept string, media []string) bool {
	for _, m := range media {
		if acceptable(accept, m) {
			return true
		}
	}
	return len(media) == 0 && acceptable(accept, "application/json")
}

// acceptable reports whether an Accept header admits media.
func acceptable(accept, media string) bool {
	if accept == "" {
		return true
	}
	typ, _, _ := strings.Cut(media, "/")
	for mt := range httpheader.MediaTypes(accept) {
		if mt == "*/*" || mt == media || mt == typ+"/*" {
			return true
		}
	}
	return false
}

// checkText refuses invalid UTF-8 and bidirectional controls in the
// path, the query and the body's strings: names and paths must read as
// what they are.
func checkText(r *http.Request, body []byte) error {
	refuse := func(field, problem string) error {
		return apierr.Newf("input:invalid_text", "%s: %s", field, problem).
			WithDetails(models.FieldProblem{Field: field, Problem: problem})
	}
	if p := safetext.Problem(r.URL.Path); p != "" {
		return refuse("path", p)
	}
	// The query's names and values as r.URL.Query() reads them (a pair
	// that does not decode, or holds a semicolon, is dropped), without
	// building the map.
	for rest := r.URL.RawQuery; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		rk, rv, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(rk)
		if err != nil {
			continue
		}
		v, err := url.QueryUnescape(rv)
		if err != nil {
			continue
		}
		for _, t := range [2]string{k, v} {
			if p := safetext.Problem(t); p != "" {
				return refuse("query."+safeField(k), p)
			}
		}
	}
	if p := safetext.JSONProblem(body); p != "" {
		return refuse("body", p)
	}
	return nil
}

func safeField(k string) string {
	if safetext.Problem(k) != "" {
		return "?"
	}
	return k
}

// bodyLimit is the route's body limit: x-body-limit in the contract (large
// for bundles), else the default for JSON. An operation that takes raw
// bytes (upload_blob) has x-body-limit for those bytes; its JSON form
// carries them in base64, which may be a third larger.
func (h *Handler) bodyLimit(rt *route, r *http.Request) int64 {
	op := rt.op
	switch {
	case op.BodyLimit <= 0:
		return h.cfg.DefaultBodyLimit
	case rt.takesRaw && !isRaw(r):
		return (op.BodyLimit+2)/3*4 + 64<<10
	}
	return op.BodyLimit
}

// rawMedia is the one media type besides JSON that a body may have.
const rawMedia = "application/octet-stream"

// isRaw reports whether the request's body is raw bytes.
func isRaw(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == rawMedia
}

func tooLarge(op operation.Operation, limit int64) *apierr.Error {
	return apierr.Newf("input:body_too_large", "the body exceeds %d bytes, the limit for %s", limit, op.ID).
		WithDetails(models.FieldProblem{Field: "body", Problem: fmt.Sprintf("larger than %d bytes", limit)})
}

// readBody reads the body up to the route's limit; a chunked body is cut
// there. Bodies are JSON, except on an operation whose contract also takes
// raw bytes (application/octet-stream).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, rt *route) ([]byte, error) {
	op := rt.op
	if r.Body == nil || r.Body == http.NoBody {
		// Nothing to read (a GET, most often): nothing to allocate.
		return nil, nil
	}
	limit := h.bodyLimit(rt, r)
	if rt.streams && isRaw(r) {
		// Read by the operation as it arrives, so that what fully
		// arrived is kept even if the rest never does.
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		r.Header.Set("Content-Type", rawMedia)
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, tooLarge(op, limit)
		}
		return nil, apierr.Newf("input:invalid", "reading the body failed: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) > 0 && op.HasBody {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch {
		case err == nil && mt == "application/json":
		case err == nil && mt == rawMedia && rt.takesRaw:
			// The generated decoder matches the media type as written.
			r.Header.Set("Content-Type", rawMedia)
		case rt.takesRaw:
			return nil, apierr.Newf("input:unsupported_media_type", "send the content as Content-Type: %s, or as JSON with Content-Type: application/json (got %q)", rawMedia, r.Header.Get("Content-Type"))
		default:
			return nil, apierr.Newf("input:unsupported_media_type", "send the body as JSON with Content-Type: application/json (got %q)", r.Header.Get("Content-Type"))
		}
	}
	if !op.HasBody {
		// Operations without a body ignore one, but the decoder must not see it.
		r.Body = http.NoBody
		r.ContentLength = 0
	}
	return body, nil
}

// authenticate establishes who is calling, by the authority the operation
// takes. Holder operations refuse any Authorization header outright: the
// holder's authority is a signature in the body, never a credential.
func (h *Handler) authenticate(r *http.Request, op operation.Operation) (*auth.Principal, error) {
	if p, ok := r.Context().Value(principalKey{}).(*auth.Principal); ok && op.Authority == "agent" {
		// An in-process call for an agent (a workflow's step): its key
		// must still be live and still hold the scope.
		p, err := h.stillValid(r.Context(), p)
		if err != nil {
			return nil, err
		}
		return p, h.scoped(op, p)
	}
	header := r.Header.Get("Authorization")
	anon := &auth.Principal{Kind: "anonymous", Caller: "ip:" + clientaddr.Of(r)}
	switch op.Authority {
	case "holder":
		if header != "" {
			return nil, apierr.New("auth:agent_authority_refused",
				"this is a holder operation: it is authorised by the holder's signature and refuses any Authorization header; send it without one")
		}
		return anon, nil
	case "sandbox_agent":
		if header == "" {
			return nil, h.unauthorized("auth:missing_credentials", "send the sandbox capability as the Authorization header returned at session creation")
		}
		sum := sha256.Sum256([]byte(header))
		return &auth.Principal{Kind: "sandbox_agent", Caller: "cap:" + hex.EncodeToString(sum[:8])}, nil
	case "anonymous":
		if header == "" {
			return anon, nil
		}
		// A key on an anonymous call is used for its rate-limit bucket only,
		// and must still be valid.
		p, err := h.agent(r.Context(), header)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	if header == "" {
		return nil, h.unauthorized("auth:missing_credentials", "this operation needs an API key: send Authorization: Bearer agk_…")
	}
	p, err := h.agent(r.Context(), header)
	if err != nil {
		return nil, err
	}
	return p, h.scoped(op, p)
}

// scoped refuses an agent whose key lacks the operation's scope.
func (h *Handler) scoped(op operation.Operation, p *auth.Principal) error {
	if op.Scope != "" && !p.HasScope(op.Scope) {
		return apierr.Newf("auth:insufficient_scope", "%s needs a key with the %s scope; a human can grant it on the keys page", op.ID, op.Scope).
			WithActions(actions.URL(h.baseURL()+"/keys", "sign_in", "human"))
	}
	return nil
}

func (h *Handler) agent(ctx context.Context, header string) (*auth.Principal, error) {
	scheme, token, ok := strings.Cut(header, " ")
	if ok && strings.EqualFold(scheme, "Bearer") && h.cfg.Tokens != nil && strings.HasPrefix(token, oauth.AccessTokenPrefix) {
		p, err := h.cfg.Tokens.Authenticate(ctx, token)
		if errors.Is(err, oauth.ErrInvalidToken) {
			return nil, h.unauthorized("auth:invalid_credentials", "the access token is unknown, expired, revoked or issued for another audience; sign in again")
		}
		if err != nil {
			return nil, apierr.Internal(err)
		}
		return p, nil
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(token, auth.KeyPrefix) {
		return nil, h.unauthorized("auth:invalid_credentials", "the Authorization header must be Bearer agk_… (an API key) or an OAuth access token")
	}
	k, err := h.cfg.Store.Keys().Live(ctx, auth.HashKey(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, h.unauthorized("auth:invalid_credentials", "the API key is unknown or revoked")
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return &auth.Principal{Kind: "agent", OrgID: k.OrgID, KeyID: k.ID, Scopes: k.Scopes, Caller: "key:" + k.ID}, nil
}

type principalKey struct{}

// WithPrincipal marks ctx as an in-process call made for p, an agent,
// without its credential: a durable task acting for the agent that
// started it. Only code inside the server can set it; a request from the
// network never carries it. The key is looked up again on every call, so a
// revoked key or a removed scope stops the task's next call.
func WithPrincipal(ctx context.Context, p *auth.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// stillValid reads the principal's key (or OAuth grant) again.
func (h *Handler) stillValid(ctx context.Context, p *auth.Principal) (*auth.Principal, error) {
	switch {
	case p.KeyID != "":
		k, err := h.cfg.Store.Keys().Lock(ctx, p.OrgID, p.KeyID)
		if errors.Is(err, store.ErrNotFound) || err == nil && k.RevokedAt != nil {
			return nil, apierr.New("auth:invalid_credentials", "the API key that started this was revoked")
		}
		if err != nil {
			return nil, apierr.Internal(err)
		}
		return &auth.Principal{Kind: "agent", OrgID: k.OrgID, KeyID: k.ID, Scopes: k.Scopes, Caller: "key:" + k.ID}, nil
	case p.GrantID != "":
		g, err := h.cfg.Store.OAuth().Grant(ctx, p.GrantID)
		if errors.Is(err, store.ErrNotFound) || err == nil && (g.RevokedAt != nil || g.OrgID != p.OrgID) {
			return nil, apierr.New("auth:invalid_credentials", "the OAuth grant that started this was revoked")
		}
		if err != nil {
			return nil, apierr.Internal(err)
		}
		return &auth.Principal{Kind: "agent", OrgID: g.OrgID, GrantID: g.ID, Scopes: g.Scopes, Caller: p.Caller}, nil
	}
	return nil, apierr.New("auth:invalid_credentials", "an in-process call names no key or grant")
}

// Authenticate checks an Authorization header as a protected operation
// would, for adapters (the MCP endpoint) that must refuse a bad credential
// before serving anything.
func (h *Handler) Authenticate(ctx context.Context, header string) (*auth.Principal, error) {
	return h.agent(ctx, header)
}

func (h *Handler) unauthorized(code models.BlockedBy, msg string) *apierr.Error {
	e := apierr.New(code, msg)
	challenge := `Bearer realm="pier"`
	if code == "auth:invalid_credentials" {
		challenge += `, error="invalid_token"`
	}
	e.Header = http.Header{"WWW-Authenticate": {challenge}}
	// A person makes keys on the keys page; say where it is.
	return e.WithActions(actions.Manual("create_key", "human"), actions.URL(h.baseURL()+"/keys", "manage_keys", "human"))
}

var validationOptions = &openapi3filter.Options{
	AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
	MultiError:              true,
	SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.WithStringFormatValidator("email", emailFormat)},
}

// emailFormat checks the contract's `format: email` as the generated
// models' decoder does (net/mail), so that an address it would refuse is
// refused here as input:invalid naming the field, rather than by the
// decoder as a body that is not JSON.
var emailFormat = openapi3.NewCallbackValidator(func(s string) error {
	if _, err := mail.ParseAddress(s); err != nil {
		return errors.New("not an email address, such as agent@example.dev")
	}
	return nil
})

var rawValidationOptions = &openapi3filter.Options{
	AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	MultiError:         true,
	ExcludeRequestBody: true,
}

// validate checks the request against the contract, so that every
// operation rejects ill-typed input the same way. Unknown query parameters
// are refused too: a misspelt filter should fail, not be ignored.
func (h *Handler) validate(r *http.Request, rt *route) error {
	var unknown []models.FieldProblem
	for name := range r.URL.Query() {
		if !rt.known[name] {
			unknown = append(unknown, models.FieldProblem{Field: "query." + name, Problem: "unknown parameter"})
		}
	}
	if len(unknown) > 0 {
		sort.Slice(unknown, func(i, j int) bool { return unknown[i].Field < unknown[j].Field })
		return apierr.Newf("input:unknown_field", "unknown query parameter %s", strings.TrimPrefix(unknown[0].Field, "query.")).WithDetails(unknown...)
	}
	params := map[string]string{}
	for _, p := range rt.operation.Parameters {
		if p.Value.In == "path" {
			params[p.Value.Name] = r.PathValue(p.Value.Name)
		}
	}
	input := &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: params,
		Route:      &routers.Route{Spec: h.doc, Path: rt.op.Path, PathItem: rt.pathItem, Method: rt.op.Method, Operation: rt.operation},
		Options:    validationOptions,
	}
	if isRaw(r) {
		// Raw content has no schema to check beyond its media type, and
		// the decoder would copy it whole. The validator's security check
		// reads a body whole too (for authentication functions, and ours
		// reads none): it does not see one, so that a streamed body
		// (x-stream-body) reaches the operation as it arrives.
		input.Options = rawValidationOptions
		body := r.Body
		r.Body = http.NoBody
		defer func() { r.Body = body }()
	}
	if err := openapi3filter.ValidateRequest(r.Context(), input); err != nil {
		return validationError(err)
	}
	return nil
}

func validationError(err error) *apierr.Error {
	v := &schemaProblems{code: "input:invalid"}
	v.visit("", err)
	if len(v.details) == 0 {
		v.details = []models.FieldProblem{{Field: "request", Problem: err.Error()}}
	}
	return v.refusal()
}

// schemaProblems gathers what the contract's validator found, as field
// problems, and the code the refusal takes.
type schemaProblems struct {
	code    models.BlockedBy
	details []models.FieldProblem
}

// visit adds the problems of err, naming fields under prefix.
func (v *schemaProblems) visit(prefix string, err error) {
	switch e := err.(type) {
	case openapi3.MultiError:
		for _, x := range e {
			v.visit(prefix, x)
		}
		return
	case *openapi3filter.RequestError:
		field := "body"
		if e.Parameter != nil {
			field = e.Parameter.In + "." + e.Parameter.Name
		}
		if e.Err == nil {
			v.details = append(v.details, models.FieldProblem{Field: field, Problem: e.Reason})
			return
		}
		var pe *openapi3filter.ParseError
		if e.Parameter == nil && errors.As(e.Err, &pe) {
			v.code = "input:malformed_json"
			v.details = append(v.details, models.FieldProblem{Field: field, Problem: "not valid JSON"})
			return
		}
		v.visit(field, e.Err)
		return
	case *openapi3.SchemaError:
		field := prefix
		if ptr := e.JSONPointer(); len(ptr) > 0 {
			field += "." + strings.Join(ptr, ".")
		}
		if e.SchemaField == "additionalProperties" || strings.HasSuffix(e.Reason, "is unsupported") {
			v.code = "input:unknown_field"
		}
		v.details = append(v.details, models.FieldProblem{Field: field, Problem: e.Reason})
		return
	}
	var re *openapi3filter.RequestError
	if errors.As(err, &re) {
		v.visit(prefix, re)
		return
	}
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		v.visit(prefix, se)
		return
	}
	v.details = append(v.details, models.FieldProblem{Field: prefix, Problem: err.Error()})
}

// refusal is the refusal of the problems gathered: the first in the
// message, every one in the details.
func (v *schemaProblems) refusal() *apierr.Error {
	msg := fmt.Sprintf("%s: %s", v.details[0].Field, v.details[0].Problem)
	if len(v.details) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(v.details)-1)
	}
	return apierr.New(v.code, msg).WithDetails(v.details...)
}

// requestHash identifies a request for idempotency: the operation, its
// path, its sorted query and its JSON body in canonical form, so that
// re-serialising the same body differently is still "the same body".
func requestHash(r *http.Request, body []byte) string {
	h := requestHasher(r)
	// Bodies compare canonically (RFC 8785): member order, white space and
	// number spelling (1, 1.0, 1e0) do not make another request.
	if canon, err := jcs.Transform(body); len(body) > 0 && err == nil {
		h.Write(canon)
	} else {
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// requestHasher hashes what identifies a request besides its body: the
// operation, its path and its sorted query.
func requestHasher(r *http.Request) hash.Hash {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", r.Method, r.URL.Path)
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", url.QueryEscape(k), strings.Join(q[k], ","))
	}
	return h
}

// idempotent runs the operation at most once per (caller, key); hash
// identifies the request (requestHash, or streamed: serveManifest).
// run makes the operation's answer: nil for the chain's handler, and the
// listener's fast path (QuoteDoor) brings its own.
func (h *Handler) idempotent(w http.ResponseWriter, r *http.Request, op operation.Operation, p *auth.Principal, key, hash string, run func(rec *Recorder)) {
	if run == nil {
		run = func(rec *Recorder) { h.inner.ServeHTTP(rec, r) }
	}
	ctx := r.Context()
	claim := store.IdempotencyClaim{Principal: p.Caller, Key: key, Operation: op.ID, RequestHash: hash}
	outcome, stored, err := h.cfg.Store.Idempotency().Begin(ctx, claim, h.cfg.Now(), h.cfg.IdempotencyLease, h.cfg.IdempotencyTTL)
	if err != nil {
		WriteError(w, r, h.cfg.Log, apierr.Internal(err))
		return
	}
	switch outcome {
	case store.IdempotencyReplay:
		w.Header().Set("Content-Type", stored.ContentType)
		w.Header().Set("Idempotency-Replayed", "true")
		w.WriteHeader(stored.Status)
		w.Write(markReplayed(stored.Body))
		return
	case store.IdempotencyMismatch:
		WriteError(w, r, h.cfg.Log, apierr.New("idempotency:key_reused",
			"this Idempotency-Key was already used with a different request; use a new key for a new request"))
		return
	case store.IdempotencyInFlight:
		e := apierr.New("idempotency:in_flight", "a request with this Idempotency-Key is still running; retry with the same key and body",
			actions.Retry(op.ID, "agent", nil, 1))
		e.RetryAfterSeconds = 1
		WriteError(w, r, h.cfg.Log, e)
		return
	}

	// The claim outlives a cancelled client: the work it guards may have
	// happened, so its outcome must be recorded either way.
	bg := context.WithoutCancel(ctx)
	rec := &Recorder{header: http.Header{}}
	done := false
	defer func() {
		if !done {
			h.cfg.Store.Idempotency().Abandon(bg, claim)
		}
	}()
	run(rec)
	done = true

	if keep(rec) {
		if err := h.cfg.Store.Idempotency().Complete(bg, claim, store.StoredResponse{
			Status: rec.status, ContentType: rec.header.Get("Content-Type"), Body: rec.body.Bytes(),
		}); err != nil {
			h.cfg.Log.ErrorContext(ctx, "storing idempotent response", "op", op.ID, "err", err)
		}
	} else if err := h.cfg.Store.Idempotency().Abandon(bg, claim); err != nil {
		h.cfg.Log.ErrorContext(ctx, "releasing idempotency key", "op", op.ID, "err", err)
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

// keep decides whether a response is stored for replay: successes and final
// refusals are; input errors and anything worth retrying are not, so that
// the same key can go again.
func keep(rec *Recorder) bool {
	if rec.status >= 200 && rec.status < 300 {
		return true
	}
	if rec.status >= 500 {
		return false
	}
	var env struct {
		BlockedBy models.BlockedBy `json:"blockedBy"`
		Retryable bool             `json:"retryable"`
	}
	if json.Unmarshal(rec.body.Bytes(), &env) != nil {
		return false
	}
	return !env.Retryable && env.BlockedBy.Namespace() != "input"
}

func markReplayed(body []byte) []byte {
	if len(body) < 2 || body[0] != '{' {
		return body
	}
	rest := bytes.TrimLeft(body[1:], " \n\t")
	if len(rest) > 0 && rest[0] == '}' {
		return append([]byte(`{"replayed":true`), rest...)
	}
	return append([]byte(`{"replayed":true,`), rest...)
}
