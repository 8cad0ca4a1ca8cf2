package oauth

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/pierhq/pier/server/internal/clientaddr"
	"github.com/pierhq/pier/server/internal/ratelimit"
)

// Mount registers the metadata, registration, token and revocation
// endpoints. The authorization endpoint and the consent page are human
// pages, mounted by package web.
//
// These endpoints are called by clients, often from a browser (an MCP
// inspector, a web IDE), with no cookies: they answer any origin.
func (s *Server) Mount(mux *http.ServeMux) {
	limiter := ratelimit.New(map[string]ratelimit.Policy{
		// Registration is anonymous and writes a row: a client registers
		// once per install, so a small bucket per address is plenty.
		"register": {PerSecond: 0.2, Burst: 20},
		"token":    {PerSecond: 5, Burst: 50},
	}, s.cfg.Now)
	limit := func(class string, next http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if d, _ := limiter.Allow(class, clientaddr.Of(r)); !d.Allowed {
				w.Header().Set("Retry-After", "5")
				writeError(w, oauthError(http.StatusTooManyRequests, "slow_down", "too many requests from this address; retry later"))
				return
			}
			next(w, r)
		}
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		mux.HandleFunc("GET "+p, cors(s.protectedResourceMetadata))
		mux.HandleFunc("OPTIONS "+p, cors(nil))
	}
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", cors(s.authorizationServerMetadata))
	mux.HandleFunc("OPTIONS /.well-known/oauth-authorization-server", cors(nil))
	mux.HandleFunc("POST /oauth/register", cors(limit("register", s.register)))
	mux.HandleFunc("OPTIONS /oauth/register", cors(nil))
	mux.HandleFunc("POST /oauth/token", cors(limit("token", s.token)))
	mux.HandleFunc("OPTIONS /oauth/token", cors(nil))
	mux.HandleFunc("POST /oauth/revoke", cors(limit("token", s.revoke)))
	mux.HandleFunc("OPTIONS /oauth/revoke", cors(nil))
}

func cors(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		if next == nil {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next(w, r)
	}
}

// ProtectedResourceMetadata is RFC 9728's document for the MCP endpoint.
type ProtectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// AuthorizationServerMetadata is RFC 8414's document.
type AuthorizationServerMetadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	RegistrationEndpoint                       string   `json:"registration_endpoint"`
	RevocationEndpoint                         string   `json:"revocation_endpoint"`
	ScopesSupported                            []string `json:"scopes_supported"`
	ResponseTypesSupported                     []string `json:"response_types_supported"`
	ResponseModesSupported                     []string `json:"response_modes_supported"`
	GrantTypesSupported                        []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported     []string `json:"revocation_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
	ServiceDocumentation                       string   `json:"service_documentation,omitempty"`
}

// Metadata returns both documents, as served.
func (s *Server) Metadata() (ProtectedResourceMetadata, AuthorizationServerMetadata) {
	iss := s.issuer()
	return ProtectedResourceMetadata{
			Resource: s.resource(), AuthorizationServers: []string{iss}, ScopesSupported: Scopes,
			BearerMethodsSupported: []string{"header"}, ResourceName: "Pier",
		}, AuthorizationServerMetadata{
			Issuer:                                     iss,
			AuthorizationEndpoint:                      iss + "/oauth/authorize",
			TokenEndpoint:                              iss + "/oauth/token",
			RegistrationEndpoint:                       iss + "/oauth/register",
			RevocationEndpoint:                         iss + "/oauth/revoke",
			ScopesSupported:                            Scopes,
			ResponseTypesSupported:                     []string{"code"},
			ResponseModesSupported:                     []string{"query"},
			GrantTypesSupported:                        []string{"authorization_code", "refresh_token"},
			TokenEndpointAuthMethodsSupported:          []string{"none"},
			RevocationEndpointAuthMethodsSupported:     []string{"none"},
			CodeChallengeMethodsSupported:              []string{"S256"},
			AuthorizationResponseIssParameterSupported: true,
		}
}

func (s *Server) protectedResourceMetadata(w http.ResponseWriter, r *http.Request) {
	prm, _ := s.Metadata()
	writeJSON(w, http.StatusOK, prm, "public, max-age=300")
}

func (s *Server) authorizationServerMetadata(w http.ResponseWriter, r *http.Request) {
	_, asm := s.Metadata()
	writeJSON(w, http.StatusOK, asm, "public, max-age=300")
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, oauthError(400, "invalid_client_metadata", "send the client metadata as JSON with Content-Type: application/json"))
		return
	}
	var m ClientMetadata
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	if err := dec.Decode(&m); err != nil {
		writeError(w, oauthError(400, "invalid_client_metadata", "the body is not a JSON client metadata object: %v", err))
		return
	}
	info, err := s.Register(r.Context(), m)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, info, "no-store")
}

// form reads an application/x-www-form-urlencoded body, the only encoding
// the token and revocation endpoints take.
func form(w http.ResponseWriter, r *http.Request) (url.Values, *Error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return nil, oauthError(400, "invalid_request", "send the parameters form-encoded (application/x-www-form-urlencoded)")
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		return nil, oauthError(400, "invalid_request", "the form could not be read")
	}
	if len(r.URL.RawQuery) > 0 {
		return nil, oauthError(400, "invalid_request", "send parameters in the body, not the query")
	}
	for k, vs := range r.PostForm {
		if len(vs) > 1 && k != "resource" {
			return nil, oauthError(400, "invalid_request", "%s appears more than once", k)
		}
	}
	// A public client may also authenticate the RFC 6749 way, with its id
	// as the Basic user and an empty password.
	if id, _, ok := r.BasicAuth(); ok && r.PostForm.Get("client_id") == "" {
		r.PostForm.Set("client_id", id)
	}
	return r.PostForm, nil
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	f, ferr := form(w, r)
	if ferr != nil {
		writeError(w, ferr)
		return
	}
	resp, err := s.Token(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp, "no-store")
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	f, ferr := form(w, r)
	if ferr != nil {
		writeError(w, ferr)
		return
	}
	if err := s.Revoke(r.Context(), f); err != nil {
		s.fail(w, r, err)
		return
	}
	noStore(w.Header())
	w.WriteHeader(http.StatusOK)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if errors.As(err, &e) {
		writeError(w, e)
		return
	}
	s.cfg.Log.ErrorContext(r.Context(), "oauth endpoint", "path", r.URL.Path, "err", err)
	writeError(w, oauthError(http.StatusInternalServerError, "server_error", "an unexpected error occurred; retry"))
}

func writeError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="pier"`)
	}
	writeJSON(w, e.Status, map[string]string{"error": e.Code, "error_description": e.Description}, "no-store")
}

func writeJSON(w http.ResponseWriter, status int, v any, cache string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if cache == "no-store" {
		noStore(h)
	} else {
		h.Set("Cache-Control", cache)
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// Challenge is the WWW-Authenticate value that sends an MCP client to the
// protected resource metadata (RFC 9728 §5.1), naming the error when a
// token was presented and refused (RFC 6750 §3.1).
func (s *Server) Challenge(invalidToken bool) string {
	c := `Bearer resource_metadata="` + s.ResourceMetadataURL() + `"`
	if invalidToken {
		c += `, error="invalid_token"`
	}
	c += `, scope="` + strings.Join(defaultScopes, " ") + `"`
	return c
}
