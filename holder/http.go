package holder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
)

// IssuerJWKSPath is where the sandbox publishes its issuer key.
const IssuerJWKSPath = "/reference/sandbox/issuer-jwks.json"

// maxResponse bounds what the holder reads from the sandbox.
const maxResponse = 1 << 20

// Client talks to the sandbox's holder endpoints. The zero value uses
// http.DefaultClient. Give it an HTTPClient that adds no credentials: holder
// requests must carry no agent authority.
type Client struct {
	HTTPClient *http.Client
}

// IssuerKey is the sandbox key that a mandate names as its audience.
type IssuerKey struct {
	KID string
	JWK jose.JSONWebKey
}

// Response is a successful sandbox envelope.
type Response struct {
	StatusCode int
	Data       json.RawMessage
	Actions    json.RawMessage
	Body       []byte
}

// APIError is an error envelope (or a non-JSON failure) from the sandbox.
type APIError struct {
	StatusCode int
	BlockedBy  string
	Message    string
	Retryable  bool
	Body       []byte
}

func (e *APIError) Error() string {
	if e.BlockedBy != "" {
		return fmt.Sprintf("sandbox refused (%d %s): %s", e.StatusCode, e.BlockedBy, e.Message)
	}
	return fmt.Sprintf("sandbox answered %d", e.StatusCode)
}

var defaultClient Client

// FetchIssuerKey reads the issuer JWKS with the default client.
func FetchIssuerKey(ctx context.Context, baseURL string) (IssuerKey, error) {
	return defaultClient.FetchIssuerKey(ctx, baseURL)
}

// RegisterMandate posts a signed mandate with the default client.
func RegisterMandate(ctx context.Context, baseURL, sessionID, registrationSecret, jws string) (*Response, error) {
	return defaultClient.RegisterMandate(ctx, baseURL, sessionID, registrationSecret, jws)
}

// PostDecision posts a signed gate decision with the default client.
func PostDecision(ctx context.Context, baseURL, sessionID, gateID, jws string) (*Response, error) {
	return defaultClient.PostDecision(ctx, baseURL, sessionID, gateID, jws)
}

// FetchIssuerKey reads the published issuer JWKS and returns its first key,
// the one new mandates must name.
func (c *Client) FetchIssuerKey(ctx context.Context, baseURL string) (IssuerKey, error) {
	body, status, err := c.do(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+IssuerJWKSPath, nil, "")
	if err != nil {
		return IssuerKey{}, err
	}
	if status != http.StatusOK {
		return IssuerKey{}, &APIError{StatusCode: status, Body: body}
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return IssuerKey{}, fmt.Errorf("holder: issuer JWKS: %w", err)
	}
	if len(set.Keys) == 0 {
		return IssuerKey{}, errors.New("holder: issuer JWKS has no keys")
	}
	key := set.Keys[0]
	if key.KeyID == "" || !key.IsPublic() || !key.Valid() {
		return IssuerKey{}, errors.New("holder: issuer JWKS: first key is not a public key with a kid")
	}
	if key.Algorithm != "" && key.Algorithm != string(jose.ES256) {
		return IssuerKey{}, fmt.Errorf("holder: issuer key is for %s, not ES256", key.Algorithm)
	}
	return IssuerKey{KID: key.KeyID, JWK: key}, nil
}

// RegisterMandate posts to /v1/sandbox/sessions/{id}/mandate with the
// registration secret the session's creator handed over; the mandate's
// signature is the holder's authority.
func (c *Client) RegisterMandate(ctx context.Context, baseURL, sessionID, registrationSecret, jws string) (*Response, error) {
	path := "/v1/sandbox/sessions/" + url.PathEscape(sessionID) + "/mandate"
	return c.post(ctx, baseURL, path, map[string]string{"mandate": jws, "registrationSecret": registrationSecret}, jws)
}

// PostDecision posts to /v1/sandbox/sessions/{id}/gates/{gateId}/decision.
// The first valid decision on a gate wins; a second one is refused.
func (c *Client) PostDecision(ctx context.Context, baseURL, sessionID, gateID, jws string) (*Response, error) {
	path := "/v1/sandbox/sessions/" + url.PathEscape(sessionID) + "/gates/" + url.PathEscape(gateID) + "/decision"
	return c.post(ctx, baseURL, path, map[string]string{"decision": jws}, jws)
}

func (c *Client) post(ctx context.Context, baseURL, path string, body any, jws string) (*Response, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	// The key is the JWS's digest: a retry of the same signature is the same
	// request, and a new signature is a new one.
	sum := sha256.Sum256([]byte(jws))
	raw, status, err := c.do(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+path, payload, hex.EncodeToString(sum[:]))
	if err != nil {
		return nil, err
	}
	var env struct {
		Data      json.RawMessage `json:"data"`
		Actions   json.RawMessage `json:"actions"`
		BlockedBy string          `json:"blockedBy"`
		Message   string          `json:"message"`
		Retryable bool            `json:"retryable"`
	}
	decodeErr := json.Unmarshal(raw, &env)
	if status < 200 || status > 299 {
		return nil, &APIError{StatusCode: status, BlockedBy: env.BlockedBy, Message: env.Message, Retryable: env.Retryable, Body: raw}
	}
	if decodeErr != nil {
		return nil, fmt.Errorf("holder: response is not a JSON envelope: %w", decodeErr)
	}
	return &Response{StatusCode: status, Data: env.Data, Actions: env.Actions, Body: raw}, nil
}

func (c *Client) do(ctx context.Context, method, target string, body []byte, idempotencyKey string) ([]byte, int, error) {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, 0, err
	}
	if len(raw) > maxResponse {
		return nil, 0, fmt.Errorf("holder: response from %s exceeds %d bytes", target, maxResponse)
	}
	return raw, resp.StatusCode, nil
}
