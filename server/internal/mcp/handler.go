package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/clientaddr"
	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/httpheader"
	"github.com/pierhq/pier/server/internal/operation"
	"github.com/pierhq/pier/server/internal/ratelimit"
)

// ProtocolVersion is the one MCP protocol version the endpoint negotiates
// (SPEC §4 rule 1, §9.3): whatever version a client asks for in initialize,
// the answer names this one.
const ProtocolVersion = "2025-03-26"

// firstStatelessVersion is where the protocol moved to per-request metadata
// and server/discover (SEP-2575). A request claiming it or later is served:
// its server/discover gets method-not-found, which tells such clients to
// fall back to initialize.
const firstStatelessVersion = "2026-07-28"

// Config wires the MCP endpoint.
type Config struct {
	// REST serves the contract's operations; every tool call is dispatched
	// to it in-process.
	REST http.Handler
	Log  *slog.Logger
	// Version is reported as serverInfo.version.
	Version string
	// AllowedOrigins are the browser origins ("https://host[:port]") allowed
	// to call the endpoint, typically the public base and API URLs. Pages of
	// this same server on a loopback name are always allowed.
	AllowedOrigins []string
	// Authenticate checks a request's Authorization header (an API key or
	// an OAuth access token). A request whose credential fails it is
	// refused with 401 before any message is served. Nil leaves checking to
	// each dispatched call.
	Authenticate func(ctx context.Context, header string) error
	// Challenge is the WWW-Authenticate value of those 401s, naming the
	// protected resource metadata so an MCP client can sign in with OAuth;
	// invalidToken says a credential was presented and refused.
	Challenge func(invalidToken bool) string
	// Limiter, when set, charges every JSON-RPC message, each entry of a
	// batch included, to the caller's RateClass bucket.
	Limiter *ratelimit.Limiter
	// MaxBatch and MaxBatchBytes cap a batch's entries and size; zero
	// means DefaultMaxBatch and DefaultMaxBatchBytes.
	MaxBatch      int
	MaxBatchBytes int64
}

// RateClass is the rate-limit class every JSON-RPC message is charged to.
const RateClass = "mcp"

// The default batch caps: a batch is for a few calls an agent makes
// together, not a way to multiply one request.
const (
	DefaultMaxBatch      = 20
	DefaultMaxBatchBytes = 1 << 20
)

// Handler serves POST /mcp.
type Handler struct {
	log       *slog.Logger
	authn     func(ctx context.Context, header string) error
	challenge func(invalidToken bool) string
	rest      http.Handler
	origins   map[string]bool
	limit     int64
	tools     map[string]*compiledTool
	shapes    *shapeCache
	prepared  *preparedCalls
	// preparedAnswers counts the calls answered from prepared.
	preparedAnswers atomic.Int64
	limiter         *ratelimit.Limiter
	maxBatch        int
	maxBatchB       int64
	// initializeResult and toolsList are encoded once: they never change.
	initializeResult []byte
	toolsList        []byte
}

// New builds the endpoint and compiles every tool in Tools.
func New(cfg Config) (*Handler, error) {
	if cfg.REST == nil {
		return nil, errors.New("mcp: no REST handler to dispatch tool calls to")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Challenge == nil {
		cfg.Challenge = func(invalid bool) string {
			if invalid {
				return `Bearer realm="pier", error="invalid_token"`
			}
			return `Bearer realm="pier"`
		}
	}
	h := &Handler{
		authn:     cfg.Authenticate,
		challenge: cfg.Challenge,
		log:       cfg.Log,
		rest:      cfg.REST,
		origins:   map[string]bool{},
		tools:     map[string]*compiledTool{},
		shapes:    newShapeCache(4096),
		prepared:  newPreparedCalls(4096),
		limiter:   cfg.Limiter,
		maxBatch:  cfg.MaxBatch,
		maxBatchB: cfg.MaxBatchBytes,
	}
	if h.maxBatch <= 0 {
		h.maxBatch = DefaultMaxBatch
	}
	if h.maxBatchB <= 0 {
		h.maxBatchB = DefaultMaxBatchBytes
	}
	for _, o := range cfg.AllowedOrigins {
		if n, ok := normalizeOrigin(o); ok {
			h.origins[n] = true
		}
	}
	// A JSON-RPC message wraps a REST body, so it may be as large as the
	// largest body a tool takes, plus room for the message around it.
	h.limit = 1 << 20
	var ordered []*compiledTool
	for _, t := range Tools {
		ct, err := compile(t)
		if err != nil {
			return nil, err
		}
		h.tools[t.Name] = ct
		ordered = append(ordered, ct)
		if op, ok := operation.Lookup(t.Name); ok && op.BodyLimit > h.limit {
			h.limit = op.BodyLimit
		}
	}
	h.limit += 64 << 10
	var err error
	h.initializeResult, h.toolsList, err = staticResults(cfg.Version, ordered)
	if err != nil {
		return nil, fmt.Errorf("mcp: encoding static results: %w", err)
	}
	return h, nil
}

// ServeHTTP applies the transport's HTTP rules, answering each refusal with
// the typed error envelope, then answers the JSON-RPC message.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		e := apierr.Newf("input:method_not_allowed", "%s %s is not allowed; use POST", r.Method, r.URL.Path)
		e.Header = http.Header{"Allow": {"POST"}}
		httpapi.WriteError(w, r, h.log, e)
		return
	}
	if !h.originAllowed(r) {
		httpapi.WriteError(w, r, h.log, apierr.Newf("auth:forbidden_origin",
			"requests from the browser origin %q are not allowed on /mcp", r.Header.Get("Origin")).
			WithActions(actions.Manual("contact_operator", "human")))
		return
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		httpapi.WriteError(w, r, h.log, apierr.New("input:not_acceptable",
			"the MCP endpoint needs an Accept header listing both application/json and text/event-stream"))
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		httpapi.WriteError(w, r, h.log, apierr.Newf("input:unsupported_media_type",
			"send the JSON-RPC message with Content-Type: application/json (got %q)", r.Header.Get("Content-Type")))
		return
	}
	// An older version than the negotiated one means a client that ignored
	// initialize's answer; newer ones are probes (see firstStatelessVersion).
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v != ProtocolVersion && v < firstStatelessVersion {
		httpapi.WriteError(w, r, h.log, apierr.Newf("input:invalid",
			"MCP-Protocol-Version %q is not supported; this server speaks %s (initialize again to negotiate it)", v, ProtocolVersion).
			WithDetails(models.FieldProblem{Field: "header.MCP-Protocol-Version", Problem: "unsupported version"}))
		return
	}
	// Per the MCP authorization rules, a credential that does not
	// authenticate is a 401 for the whole request, whatever it holds, with
	// the challenge that starts the client's OAuth flow. For a body of a
	// stated length within the limit the check waits (credCheck).
	var cred *credCheck
	if a := r.Header.Get("Authorization"); a != "" && h.authn != nil {
		if r.ContentLength >= 0 && r.ContentLength <= h.limit {
			cred = &credCheck{header: a}
		} else if e := h.checkCredential(r.Context(), a); e != nil {
			httpapi.WriteError(w, r, h.log, e)
			return
		}
	}
	// A body announced over the limit is refused before a byte is read.
	if r.ContentLength > h.limit {
		httpapi.WriteError(w, r, h.log, apierr.Newf("input:body_too_large", "the JSON-RPC message exceeds %d bytes", h.limit))
		return
	}
	body, err := readBody(w, r, h.limit)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			httpapi.WriteError(w, r, h.log, apierr.Newf("input:body_too_large", "the JSON-RPC message exceeds %d bytes", h.limit))
			return
		}
		httpapi.WriteError(w, r, h.log, apierr.Newf("input:invalid", "reading the body failed: %v", err))
		return
	}
	if cred != nil && !loneMessage(body) {
		if e := h.checkCredential(r.Context(), cred.header); e != nil {
			httpapi.WriteError(w, r, h.log, e)
			return
		}
		cred = nil
	}
	if e := h.serveJSONRPC(r.Context(), w, body, r.Header, caller{remoteAddr: clientaddr.RemoteAddr(r), host: r.Host, key: rateKey(r), cred: cred}); e != nil {
		httpapi.WriteError(w, r, h.log, e)
	}
}

// readBody reads the request's body, at most limit bytes. A body of a
// stated length (what clients send) is read into one buffer of that size.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= limit {
		// net/http ends a body with a Content-Length at that length.
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

// credentialsRequired is the 401 for a call of a governed tool sent
// without credentials: anonymous tools, initialize and tools/list work
// without any, so the endpoint asks for credentials only when a request
// needs them, the way the MCP authorization spec lets a client discover
// that it must sign in.
func (h *Handler) credentialsRequired() *apierr.Error {
	e := apierr.New("auth:missing_credentials",
		"this tool needs an agent's credentials: send Authorization: Bearer agk_… (an API key), or sign in with OAuth as the WWW-Authenticate challenge describes")
	e.Header = challengeHeader(h.challenge(false))
	return e
}

func challengeHeader(challenge string) http.Header {
	h := http.Header{}
	h.Set("WWW-Authenticate", challenge)
	return h
}

// caller is what a dispatched tool call keeps from the MCP request besides
// its headers: the client's address, which rate limits key anonymous callers
// by, and the Host it named.
type caller struct {
	remoteAddr string
	host       string
	// key names the caller's rate-limit bucket.
	key string
	// cred, when set, is the credential check a lone message defers.
	cred *credCheck
	// authorization is the request's Authorization value, when the
	// listener's fast path read it (nil otherwise: see header).
	authorization []byte
	// ip, when set, is the client's address without its port (the fast
	// path's; see remoteAddr).
	ip string
	// prep, when set, is told of a tool call answered from the REST
	// handler's kept answers (the fast path keeps it: preparedCalls).
	prep *preparedNote
}

// credCheck is the credential check of a lone message, deferred so that
// a tools/call does not look the credential up twice: the REST chain
// authenticates the call's Authorization before it answers, so a success
// from an operation that takes an agent's or an anonymous caller's
// credential proves it. Whatever else the message meets (another method,
// arguments refused before REST, a REST refusal, the rate limit) checks
// it as ServeHTTP would have, before anything is answered; a message
// that does not authenticate is answered 401 as before.
type credCheck struct {
	header string
	done   bool // proven by REST, or checked
}

// settle finishes c's deferred credential check, if any: nil when the
// credential authenticates, else the refusal to answer the request with.
func (h *Handler) settle(ctx context.Context, c caller) *apierr.Error {
	if c.cred == nil || c.cred.done {
		return nil
	}
	c.cred.done = true
	return h.checkCredential(ctx, c.cred.header)
}

// checkCredential runs Config.Authenticate on an Authorization value;
// an unknown or revoked credential gets the challenge that starts the
// client's OAuth flow.
func (h *Handler) checkCredential(ctx context.Context, header string) *apierr.Error {
	err := h.authn(ctx, header)
	if err == nil {
		return nil
	}
	e := apierr.As(err)
	if e.Code == "auth:invalid_credentials" {
		e.Header = challengeHeader(h.challenge(true))
	}
	return e
}

// loneMessage reports whether a body is one JSON-RPC message rather than
// a batch (or not JSON).
func loneMessage(body []byte) bool {
	body = bytes.TrimSpace(body)
	return len(body) > 0 && body[0] == '{'
}

// rateKey is the caller a message is charged to: its credential when it
// sends one (hashed), else its address as clientaddr resolves it.
func rateKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		sum := sha256.Sum256([]byte(a))
		return "cred:" + hex.EncodeToString(sum[:12])
	}
	return "ip:" + clientaddr.Of(r)
}

// allow charges one message to the caller; when refused it returns the
// seconds to wait.
func (h *Handler) allow(c caller) (int, bool) {
	if h.limiter == nil {
		return 0, true
	}
	d, limited := h.limiter.Allow(RateClass, c.key)
	if !limited || d.Allowed {
		return 0, true
	}
	return max(int((d.RetryAfter.Milliseconds()+999)/1000), 1), false
}

// acceptsBoth reports whether Accept lists both application/json and
// text/event-stream, the streamable HTTP transport's rule (SPEC §4 rule 1,
// §7 rule 3). Wildcards do not count: curl's default */* says nothing of
// either, and is 406 as a missing Accept is. A media type with q=0 is
// excluded.
func acceptsBoth(values []string) bool {
	// What MCP clients send, answered without parsing.
	if len(values) == 1 && (values[0] == "application/json, text/event-stream" || values[0] == "text/event-stream, application/json") {
		return true
	}
	var jsonOK, streamOK bool
	for mt := range httpheader.MediaTypes(values...) {
		switch mt {
		case "application/json":
			jsonOK = true
		case "text/event-stream":
			streamOK = true
		}
	}
	return jsonOK && streamOK
}

// originAllowed is the DNS-rebinding guard. A request without Origin is not
// from a browser and cannot have been rebound. A browser's Origin must be one
// of the configured origins, or a loopback origin on the port of a loopback
// Host: the same local server under another loopback name. The Host header
// alone proves nothing, since a rebound page names the attacker's host in
// both Origin and Host; and preview sites on *.localhost are other origins.
func (h *Handler) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	n, ok := normalizeOrigin(o)
	if !ok {
		return false // "null" and other opaque origins
	}
	if h.origins[n] {
		return true
	}
	u, _ := url.Parse(n)
	host, port := splitHost(r.Host, r.TLS != nil)
	return isLoopback(u.Hostname()) && isLoopback(host) && defaultPort(u) == port
}

// normalizeOrigin lowercases scheme and host and drops a default port, so
// that configured and received origins compare as strings.
func normalizeOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return strings.ToLower(u.Scheme) + "://" + host, true
}

func defaultPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

func splitHost(hostport string, tls bool) (host, port string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
		port = "80"
		if tls {
			port = "443"
		}
	}
	return strings.ToLower(host), port
}

// isLoopback accepts exactly the loopback names, never subdomains of
// localhost: those are where preview sites live.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
