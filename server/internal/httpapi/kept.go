package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/store"
)

// KeptRequest is a request the listener read itself (the edge's fast
// path), offered to AnswerKept before net/http would read it.
type KeptRequest struct {
	// Method is GET or POST.
	Method string
	// Path and Query are the request target split at its first '?'; the
	// path is as sent and needs no decoding.
	Path, Query []byte
	// Accept and ContentType are the headers' values, nil when absent;
	// each was sent at most once.
	Accept, ContentType []byte
	// Authorization is the header's value, nil when absent; it was sent
	// at most once.
	Authorization []byte
	// Body is the whole body (Content-Length framed).
	Body []byte
	// ClientIP is the peer's address without its port.
	ClientIP string
	// Refusals: the caller sends on a 429 as well as a 200 (the
	// listener's fast path). Without it a refused request is not
	// answered (ok false), and the chain answers it.
	Refusals bool
	// BodyOnly: the caller uses the body alone (an MCP tool call), so
	// no head is made; dst comes back as it was.
	BodyOnly bool
}

// mayKeep lists rt among the routes AnswerKept answers: pure or versioned
// reads with a fixed path, for anyone, answering JSON, with JSON bodies.
func (h *Handler) mayKeep(rt *route) {
	op := rt.op
	if !op.Pure && rt.version == nil || op.Authority != "anonymous" || rt.takesRaw ||
		strings.Contains(op.Path, "{") || !acceptableAny("application/json", rt.medias) {
		return
	}
	switch op.Method {
	case http.MethodGet:
		h.keptGet[op.Path] = rt
	case http.MethodPost:
		h.keptPost[op.Path] = rt
	}
}

// AnswerKept answers q when the chain would answer it from a kept answer
// (see servePure): the same checks pass, the answer is kept and still
// good, and the rate limit allows it, which takes from the caller's
// bucket as the chain would; when the rate limit refuses it, it answers
// the chain's 429 if q.Refusals. It appends to dst the status line and the
// header lines the handler sets (without Date, and without the blank line
// ending the head) and returns them with the body, which the caller must
// not modify. ok is false, with nothing taken from any bucket, for every
// other request (a miss, anything the checks do not pass
// without a doubt): ServeHTTP answers those.
func (h *Handler) AnswerKept(dst []byte, q *KeptRequest) (head, body []byte, ok bool) {
	var rt *route
	switch q.Method {
	case http.MethodGet:
		rt = h.keptGet[string(q.Path)]
	case http.MethodPost:
		rt = h.keptPost[string(q.Path)]
	}
	if rt == nil || !plainAccept(q.Accept) {
		return dst, nil, false
	}
	caller := "ip:" + q.ClientIP
	if q.Authorization != nil {
		// A key on these (anonymous) reads only names the rate-limit
		// bucket; the chain answers any other credential.
		k, ok := h.liveKey(q.Authorization)
		if !ok {
			return dst, nil, false
		}
		caller = "key:" + k.ID
	}
	op := rt.op
	if len(q.Body) > 0 {
		// A body the operation does not take would be part of the key
		// all the same; one it takes must be JSON, within the limit.
		limit := op.BodyLimit
		if limit <= 0 {
			limit = h.cfg.DefaultBodyLimit
		}
		if !op.HasBody || int64(len(q.Body)) > limit || !equalFold(q.ContentType, "application/json") {
			return dst, nil, false
		}
	}
	key := pureKey(op.ID, q.Query, q.Body)
	k, version, ok, stale := h.kept(rt, key)
	if !ok && q.Refusals {
		// No answer to give, but none is needed for a caller the
		// limiter knows it refuses.
		if d, refused := h.cfg.Limiter.Refused(op.RateLimit, caller); refused {
			head, body := refusal(dst, op.ID, d)
			return head, body, true
		}
	}
	if !ok {
		// A versioned answer goes stale every second and after every
		// write: it is made again here, as the chain would make it, for a
		// caller the rate limit lets through (or the chain answers).
		if !stale {
			return dst, nil, false
		}
		if !h.cfg.Limiter.Would(op.RateLimit, caller) {
			if !q.Refusals {
				return dst, nil, false
			}
			return h.remakeAsked(dst, rt, key, version, q, caller)
		}
		if k, ok = h.remake(rt, key, version, q, caller); !ok {
			return dst, nil, false
		}
	}
	d, limited := h.cfg.Limiter.Allow(op.RateLimit, caller)
	if limited && !d.Allowed {
		// Refused, which takes no token: answered here as the chain
		// answers it, so that a refused caller's connection (a proxy's
		// keep-alive one too) stays on the fast path; or left to the
		// chain, which asks again.
		if !q.Refusals {
			return dst, nil, false
		}
		head, body := refusal(dst, op.ID, d)
		return head, body, true
	}
	if q.BodyOnly {
		return dst, k.body, true
	}
	head, body = keptAnswer(dst, k, d, limited)
	return head, body, true
}

// remakeAsked answers a stale kept read for a caller the limiter cannot
// tell without asking (shared buckets, no lease in hand): it asks, which
// takes the token, answers a refusal, and makes the answer again for a
// caller it allows. That answer was a 200 before, so making it again
// fails only where the chain's would not be a 200 either; the chain then
// answers, and takes a second token.
func (h *Handler) remakeAsked(dst []byte, rt *route, key string, version uint64, q *KeptRequest, caller string) (head, body []byte, ok bool) {
	d, limited := h.cfg.Limiter.Allow(rt.op.RateLimit, caller)
	if limited && !d.Allowed {
		head, body = refusal(dst, rt.op.ID, d)
		return head, body, true
	}
	k, ok := h.remake(rt, key, version, q, caller)
	if !ok {
		return dst, nil, false
	}
	if q.BodyOnly {
		return dst, k.body, true
	}
	head, body = keptAnswer(dst, k, d, limited)
	return head, body, true
}

// keptAnswer appends to dst the head of the 200 the chain answers with
// k, under the rate limit's decision d when limited.
func keptAnswer(dst []byte, k kept, d ratelimit.Decision, limited bool) (head, body []byte) {
	// Header lines in net/http's order: sorted by name.
	dst = append(dst, "HTTP/1.1 200 OK\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(k.body)), 10)
	dst = append(dst, "\r\nContent-Type: application/json\r\n"...)
	dst = appendRateHeaders(dst, d, limited)
	return dst, k.body
}

// appendRateHeaders appends the Ratelimit and Ratelimit-Policy header
// lines of d when limited, as the chain sets them.
func appendRateHeaders(dst []byte, d ratelimit.Decision, limited bool) []byte {
	if !limited {
		return dst
	}
	dst = append(dst, "Ratelimit: "...)
	dst = d.AppendLimit(dst)
	dst = append(dst, "\r\nRatelimit-Policy: "...)
	dst = d.AppendPolicy(dst)
	return append(dst, "\r\n"...)
}

// rateLimited is the refusal of a request to operation op that d did not
// allow.
func rateLimited(op string, d ratelimit.Decision) *apierr.Error {
	secs := retryAfter(d)
	e := apierr.Newf("rate:limited", "rate limit for %s exhausted; retry in %d s", op, secs).
		WithActions(actions.Retry(op, "agent", nil, secs))
	e.RetryAfterSeconds = secs
	return e
}

// retryAfter is d's Retry-After in whole seconds, at least one.
func retryAfter(d ratelimit.Decision) int {
	return max(int((d.RetryAfter.Milliseconds()+999)/1000), 1)
}

// refusals are the bodies of rateLimited's envelopes, by operation and
// Retry-After (a few seconds each): a refused caller sends fast.
var refusals sync.Map // string → []byte

// refusal appends to dst the head of the 429 the chain answers for d
// (WriteError's, less Date and the blank line) and returns it with the
// body.
func refusal(dst []byte, op string, d ratelimit.Decision) (head, body []byte) {
	secs := retryAfter(d)
	key := op + " " + strconv.Itoa(secs)
	if b, ok := refusals.Load(key); ok {
		body = b.([]byte)
	} else {
		e := rateLimited(op, d)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(ErrorEnvelope(e, op))
		body = buf.Bytes()
		refusals.Store(key, body)
	}
	// Header lines in net/http's order: sorted by name.
	dst = append(dst, "HTTP/1.1 429 Too Many Requests\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\nContent-Type: application/json\r\nRatelimit: "...)
	dst = d.AppendLimit(dst)
	dst = append(dst, "\r\nRatelimit-Policy: "...)
	dst = d.AppendPolicy(dst)
	dst = append(dst, "\r\nRetry-After: "...)
	dst = strconv.AppendInt(dst, int64(secs), 10)
	return append(dst, "\r\n"...), body
}

// plainAccept reports whether an Accept header is one that admits JSON
// without a doubt: none (or empty), */* or application/json.
func plainAccept(v []byte) bool {
	return len(v) == 0 || string(v) == "*/*" || equalFold(v, "application/json")
}

// equalFold reports whether b is s, an ASCII string, in any case: the length
// check keeps bytes.EqualFold's Unicode folding (U+017F is s) out.
func equalFold(b []byte, s string) bool {
	return len(b) == len(s) && bytes.EqualFold(b, []byte(s))
}

// remake makes the answer to q again, as servePure would after the
// chain's checks, and keeps it: q was answered 200 before, so it passed
// them. ok is false when the answer is not a 200, which the chain then
// makes and answers itself.
func (h *Handler) remake(rt *route, key string, version uint64, q *KeptRequest, caller string) (k kept, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			// ServeHTTP answers the panic when the chain meets it again.
			h.cfg.Log.Error("remaking a kept answer", "op", rt.op.ID, "panic", v)
			ok = false
		}
	}()
	r := &http.Request{Method: q.Method, URL: &url.URL{Path: rt.op.Path, RawQuery: string(q.Query)},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Body: http.NoBody,
		RemoteAddr: net.JoinHostPort(q.ClientIP, "0")}
	if len(q.Body) > 0 {
		r.Header["Content-Type"] = []string{"application/json"}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(q.Body)), int64(len(q.Body))
	}
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: "anonymous", Caller: caller})
	r = r.WithContext(context.WithValue(ctx, opKey{}, rt))
	if err := h.validate(r, rt); err != nil {
		return kept{}, false
	}
	rec := &Recorder{header: http.Header{}}
	h.inner.ServeHTTP(rec, r)
	if rec.status != http.StatusOK {
		return kept{}, false
	}
	k = kept{body: bytes.Clone(rec.body.Bytes()), version: version, at: h.cfg.Now()}
	h.pure.put(key, k)
	return k, true
}

// Keeping says how h answers operation id without running it: kept when it
// answers from the answers it keeps (a pure read, or a versioned one while
// its version holds), fast when the listener's fast path may also answer
// it before net/http reads the request (AnswerKept). The operation table
// (internal/tools/optable) prints it.
func (h *Handler) Keeping(id string) (kept, versioned, fast bool) {
	rt := h.ops[id]
	if rt == nil {
		return false, false, false
	}
	if _, extra := h.cfg.Extra[id]; extra {
		return false, false, false
	}
	p := rt.op.Path
	fast = h.keptGet[p] == rt || h.keptPost[p] == rt
	return rt.op.Pure || rt.version != nil, rt.version != nil, fast
}

// liveKey is the id of the live API key an Authorization header carries:
// from the store's memory, or read there once (as the chain would read it,
// so that a connection whose first request brings a key the store had not
// seen yet stays on the fast path). ok is false for anything else (no
// key, an OAuth token, an unknown or revoked key, an error), which the
// chain then answers.
func (h *Handler) liveKey(header []byte) (k store.APIKey, ok bool) {
	const bearer = "Bearer "
	if len(header) <= len(bearer) || !equalFold(header[:len(bearer)], bearer) {
		return store.APIKey{}, false
	}
	token := header[len(bearer):]
	if !bytes.HasPrefix(token, []byte(auth.KeyPrefix)) {
		return store.APIKey{}, false
	}
	k, err := h.cfg.Store.Keys().Live(context.Background(), auth.HashKey(string(token)))
	return k, err == nil
}
