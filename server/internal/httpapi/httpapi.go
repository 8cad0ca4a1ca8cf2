package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/pierhq/pier/openapi"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/operation"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/sandbox"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// Records is what the REST layer reads and writes in the store itself,
// below the service: the credentials it checks (agent keys, OAuth grants)
// and the answers it replays (idempotency). *store.Store is one.
type Records interface {
	Keys() store.Keys
	OAuth() store.OAuth
	Idempotency() store.Idempotency
}

// Config wires the REST adapter.
type Config struct {
	Service *service.Service
	Store   Records
	Limiter *ratelimit.Limiter
	Log     *slog.Logger
	Now     func() time.Time
	// BaseURL gives the public base URL, for absolute links in actions.
	BaseURL func() string
	// IdempotencyTTL is how long responses are kept for replay (24h).
	IdempotencyTTL time.Duration
	// IdempotencyLease is how long an in-flight claim blocks others before
	// a crashed holder's claim may be taken over.
	IdempotencyLease time.Duration
	// DefaultBodyLimit applies when an operation sets no x-body-limit.
	DefaultBodyLimit int64
	// Sandbox serves the sandbox operations and the reference release; nil
	// leaves them answering plan:not_implemented.
	Sandbox *sandbox.Service
	// Workflows prepares and applies workflows; nil leaves them answering
	// plan:not_implemented.
	Workflows Workflows
	// Tokens authenticates OAuth access tokens as agents; nil accepts API
	// keys only.
	Tokens interface {
		Authenticate(ctx context.Context, token string) (*auth.Principal, error)
	}
	// Versions names the reads whose answer is a function of the request
	// and of a version the store bumps after every write they depend on
	// (search_domains: which names are sold or claimed). Their answers are
	// kept like pure ones while the version holds, for at most a second.
	Versions map[string]func() uint64
	// Extra routes served beside the contract's (the MCP endpoint, say),
	// keyed by operation id. They get the same routing and error handling
	// but none of the JSON middleware.
	Extra map[string]http.Handler
}

// Handler is the REST API.
type Handler struct {
	cfg   Config
	doc   *openapi3.T
	mux   *http.ServeMux
	inner http.Handler
	ops   map[string]*route
	pure  *pureCache
	// keptGet and keptPost are the routes AnswerKept may answer, by path.
	keptGet, keptPost map[string]*route
	// quotes makes create_quote's answer, for the generated handler and
	// the listener's fast path (QuoteDoor).
	quotes quoteRoutes
}

type route struct {
	op        operation.Operation
	operation *openapi3.Operation
	pathItem  *openapi3.PathItem
	known     map[string]bool // query parameter names
	// takesRaw: the body may also be raw bytes (application/octet-stream).
	takesRaw bool
	// streams: raw bytes are not read ahead but handed to the operation
	// as they arrive, up to the limit (x-stream-body in the contract).
	streams bool
	// manifest: the JSON body carries a whole manifest, decoded and
	// handed to the service entry by entry as it arrives.
	manifest bool
	// version, for a versioned read, is Config.Versions' counter.
	version func() uint64
	// medias are the media types of its successful answers.
	medias []string
	// acceptsFast, when set, proves some requests valid without the
	// contract's validator (see acceptsFast).
	acceptsFast func(r *http.Request, body []byte) bool
}

type opKey struct{}

func opFromContext(ctx context.Context) (operation.Operation, bool) {
	r, ok := ctx.Value(opKey{}).(*route)
	if !ok {
		return operation.Operation{}, false
	}
	return r.op, true
}

// New builds the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.IdempotencyTTL == 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.IdempotencyLease == 0 {
		cfg.IdempotencyLease = time.Minute
	}
	if cfg.DefaultBodyLimit == 0 {
		cfg.DefaultBodyLimit = 1 << 20
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.YAML)
	if err != nil {
		return nil, fmt.Errorf("httpapi: load contract: %w", err)
	}
	h := &Handler{cfg: cfg, doc: doc, mux: http.NewServeMux(), ops: map[string]*route{}, pure: newPureCache(4096),
		keptGet: map[string]*route{}, keptPost: map[string]*route{}}

	impl := newOperations(cfg.Service, &h.cfg)
	h.quotes = impl.quoteRoutes
	strict := api.NewStrictHandlerWithOptions(impl, []api.StrictMiddlewareFunc{withRequest}, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			WriteError(w, r, cfg.Log, apierr.Newf("input:malformed_json", "the body could not be decoded: %v", err))
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			WriteError(w, r, cfg.Log, err)
		},
	})
	h.inner = api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		BaseRouter: http.NewServeMux(),
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			WriteError(w, r, cfg.Log, apierr.Newf("input:invalid", "%v", err))
		},
	})

	for _, op := range operation.All {
		pi := doc.Paths.Find(op.Path)
		if pi == nil {
			return nil, fmt.Errorf("httpapi: %s: path %s not in contract", op.ID, op.Path)
		}
		rt := &route{op: op, pathItem: pi, operation: pi.GetOperation(op.Method), known: map[string]bool{}, version: cfg.Versions[op.ID]}
		for _, p := range rt.operation.Parameters {
			if p.Value.In == "query" {
				rt.known[p.Value.Name] = true
			}
		}
		if rb := rt.operation.RequestBody; rb != nil && rb.Value != nil && rb.Value.Content.Get(rawMedia) != nil {
			rt.takesRaw = true
			rt.streams = rt.operation.Extensions["x-stream-body"] == true
		}
		rt.medias = responseMedias(rt)
		rt.manifest = streamsManifest[op.ID]
		rt.acceptsFast = acceptsFast[op.ID]
		h.ops[op.ID] = rt
		var next http.Handler
		if extra, ok := cfg.Extra[op.ID]; ok {
			next = extra
		} else {
			next = h.chain(rt)
			h.mayKeep(rt)
		}

		h.mux.Handle(op.Method+" "+op.Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r = r.WithContext(context.WithValue(r.Context(), opKey{}, rt))
			defer answerPanic(h.cfg.Log, w, r)
			next.ServeHTTP(w, r)
		}))
	}
	h.mux.HandleFunc("/", h.unmatched)
	return h, nil
}

// Mux returns the router, for mounting routes that are not operations
// (/healthz, /openapi.json).
func (h *Handler) Mux() *http.ServeMux { return h.mux }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer answerPanic(h.cfg.Log, w, r)
	h.mux.ServeHTTP(w, r)
}

// answerPanic answers a handler's panic with the 500 envelope: retryable,
// and its action a retry of r's operation when r's context names one (each
// operation's route recovers its own panics so that it does), else a
// human's contact with the operator. http.ErrAbortHandler goes on up, as
// net/http expects.
func answerPanic(log *slog.Logger, w http.ResponseWriter, r *http.Request) {
	if v := recover(); v != nil {
		if v == http.ErrAbortHandler {
			panic(v)
		}
		WriteError(w, r, log, apierr.Internal(fmt.Errorf("panic: %v", v)))
	}
}

// unmatched answers 405 when the path exists under another method, else 404.
func (h *Handler) unmatched(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pattern := h.mux.Handler(r2); pattern != "" && pattern != "/" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		e := apierr.Newf("input:method_not_allowed", "%s %s is not allowed; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or "))
		e.Header = http.Header{"Allow": {strings.Join(allowed, ", ")}}
		WriteError(w, r, h.cfg.Log, e)
		return
	}
	WriteError(w, r, h.cfg.Log, apierr.Newf("not_found:route", "no route %s %s; the contract is at /openapi.json", r.Method, r.URL.Path))
}
