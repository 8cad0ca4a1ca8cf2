package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/safetext"
	"github.com/pierhq/pier/server/internal/service"
)

// QuoteDoor answers create_quote on the listener's fast path, before
// net/http reads the request: the request is read by the scanner that
// proves a create_quote body valid (quotebody.go), and the answer is made
// without net/http, its middleware or the generated decoder. It answers
// only a request the chain would run (a JSON body it proves valid, a live
// key holding the quote scope, an Accept that admits JSON, no query) and
// hands every other to net/http untouched, before anything is taken from
// a bucket or written: the chain then answers with its own refusal. Once
// it has taken a token it answers whatever happens, as the chain would:
// the rate limit's refusal, the operation's error envelope, an
// Idempotency-Key's replay or refusal, or the quote. TestQuoteFastPath
// in the server sends the same requests down both paths and compares
// them.
type QuoteDoor struct {
	h  *Handler
	rt *route
}

// CreateQuoteDoor is h's door for create_quote on the fast path, or nil
// when create_quote is not the chain's own (an Extra handler serves it).
func CreateQuoteDoor(h *Handler) *QuoteDoor {
	rt := h.ops["create_quote"]
	if _, extra := h.cfg.Extra["create_quote"]; extra || rt == nil || !slices.Contains(rt.medias, "application/json") {
		return nil
	}
	return &QuoteDoor{h: h, rt: rt}
}

// QuoteRequest is a create_quote request as the listener read it.
type QuoteRequest struct {
	KeptRequest
	// IdempotencyKey is the header's value, nil when absent; it was
	// sent at most once.
	IdempotencyKey []byte
	// Scratch is a buffer the answer's body may be made in (appended to
	// from Scratch[:0]); Answer sets it to the buffer it used.
	Scratch []byte
}

// Answer appends to dst the status line and header lines of q's answer
// (without Date, and without the blank line ending the head) and returns
// them with the body, framed as net/http frames it. ok is false, with
// nothing taken or written, for a request net/http must answer.
func (d *QuoteDoor) Answer(dst []byte, q *QuoteRequest) (head, body []byte, ok bool) {
	h, op := d.h, d.rt.op
	var dec ratelimit.Decision
	var limited, taken bool
	defer func() {
		v := recover()
		switch {
		case v == nil:
		case !taken:
			// Nothing taken or written yet: net/http answers it.
			head, body, ok = dst, nil, false
		default:
			// As the handler answers a panic (answerPanic): a
			// 500 envelope whose action retries create_quote, with the
			// rate limit's headers the chain had set; the connection
			// kept.
			rec := d.recorder(dec, limited)
			WriteError(rec, d.request(context.WithValue(context.Background(), opKey{}, d.rt), q), h.cfg.Log, apierr.Internal(fmt.Errorf("panic: %v", v)))
			head, body, ok = d.recorded(dst, rec, q)
		}
	}()
	if q.Method != http.MethodPost || string(q.Path) != op.Path || q.Query != nil || !plainAccept(q.Accept) ||
		string(q.ContentType) != "application/json" || len(q.Body) == 0 || int64(len(q.Body)) > d.limit() ||
		q.IdempotencyKey != nil && !idempotencyKeyText(q.IdempotencyKey) {
		return dst, nil, false
	}
	var req service.QuoteRequest
	if !readQuoteBody(q.Body, &req) || safetext.JSONProblem(q.Body) != "" {
		return dst, nil, false
	}
	k, ok := h.liveKey(q.Authorization)
	if !ok {
		return dst, nil, false
	}
	p := &auth.Principal{Kind: "agent", OrgID: k.OrgID, KeyID: k.ID, Scopes: k.Scopes, Caller: "key:" + k.ID}
	if op.Scope != "" && !p.HasScope(op.Scope) {
		return dst, nil, false
	}
	dec, limited = h.cfg.Limiter.Allow(op.RateLimit, p.Caller)
	taken = true
	if limited && !dec.Allowed {
		head, body = refusal(dst, op.ID, dec)
		return head, body, true
	}
	ctx := auth.WithPrincipal(context.WithValue(context.Background(), opKey{}, d.rt), p)
	if q.IdempotencyKey == nil {
		res, err := d.h.quotes.createQuote(ctx, req)
		if err == nil {
			head, body, q.Scratch = created(dst, res, dec, limited, q.Scratch)
			return head, body, true
		}
		rec := d.recorder(dec, limited)
		WriteError(rec, d.request(ctx, q), h.cfg.Log, err)
		return d.recorded(dst, rec, q)
	}
	r := d.request(ctx, q)
	rec := d.recorder(dec, limited)
	h.idempotent(rec, r, op, p, string(q.IdempotencyKey), requestHash(r, q.Body), func(rec *Recorder) {
		res, err := d.h.quotes.createQuote(ctx, req)
		if err != nil {
			WriteError(rec, r, h.cfg.Log, err)
			return
		}
		encodeCreated(rec, res)
	})
	return d.recorded(dst, rec, q)
}

// limit is create_quote's body limit (bodyLimit: it takes no raw bytes).
func (d *QuoteDoor) limit() int64 {
	if d.rt.op.BodyLimit <= 0 {
		return d.h.cfg.DefaultBodyLimit
	}
	return d.rt.op.BodyLimit
}

// recorder is a Recorder holding the rate limit's headers, as the chain
// sets them before it runs the operation.
func (d *QuoteDoor) recorder(dec ratelimit.Decision, limited bool) *Recorder {
	rec := &Recorder{header: http.Header{}}
	if limited {
		limit, policy := dec.Headers()
		rec.header["Ratelimit"] = []string{limit}
		rec.header["Ratelimit-Policy"] = []string{policy}
	}
	return rec
}

// request is the request the chain would have made of q, for what reads
// one (WriteError, the idempotency hash).
func (d *QuoteDoor) request(ctx context.Context, q *QuoteRequest) *http.Request {
	r := &http.Request{Method: q.Method, URL: &url.URL{Path: d.rt.op.Path}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, RemoteAddr: net.JoinHostPort(q.ClientIP, "0"), ContentLength: int64(len(q.Body))}
	return r.WithContext(ctx)
}

// recorded answers what rec recorded, as net/http writes it; a server
// error is logged as the server's request log logs it.
func (d *QuoteDoor) recorded(dst []byte, rec *Recorder, q *QuoteRequest) (head, body []byte, ok bool) {
	if rec.status >= 500 && rec.status != http.StatusNotImplemented {
		d.h.cfg.Log.Log(context.Background(), slog.LevelError, "request", "method", q.Method, "path", d.rt.op.Path,
			"client", q.ClientIP, "status", rec.status)
	}
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(rec.status), 10)
	dst = append(dst, ' ')
	dst = append(dst, http.StatusText(rec.status)...)
	dst = append(dst, "\r\n"...)
	names := make([]string, 0, len(rec.header))
	for name := range rec.header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range rec.header[name] {
			dst = append(append(append(append(dst, name...), ": "...), v...), "\r\n"...)
		}
	}
	head, body = framed(dst, rec.body.Bytes(), nil)
	return head, body, true
}

// chunkAfter is net/http's buffer before chunking: a body a handler
// writes whole, without a Content-Length, goes with its length when it
// fits, and chunked when it does not.
const chunkAfter = 2048

// framed appends to head the framing header of b as net/http frames a
// body written whole by a handler that set no length, and returns it
// with the body to send, made in scratch when chunked.
func framed(head, b, scratch []byte) ([]byte, []byte) {
	if len(b) <= chunkAfter {
		head = append(head, "Content-Length: "...)
		head = strconv.AppendInt(head, int64(len(b)), 10)
		return append(head, "\r\n"...), b
	}
	head = append(head, "Transfer-Encoding: chunked\r\n"...)
	body := strconv.AppendInt(scratch, int64(len(b)), 16)
	body = append(append(append(body, "\r\n"...), b...), "\r\n0\r\n\r\n"...)
	return head, body
}

// created appends to dst the head of create_quote's 201 with res, as the
// chain answers it (the generated handler's bytes, appendQuoteEnvelope), and returns it
// with the body, made in scratch, and the buffer to keep as scratch.
func created(dst []byte, res api.CreateQuote201JSONResponse, dec ratelimit.Decision, limited bool, scratch []byte) (head, body, kept []byte) {
	b := appendQuoteEnvelope(scratch[:0], res)
	// Header lines in net/http's order: sorted by name.
	dst = append(dst, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"...)
	dst = appendRateHeaders(dst, dec, limited)
	head, body = framed(dst, b, nil)
	return head, body, b[:0]
}

// encodeCreated writes create_quote's 201 with res to w, as the generated
// handler does.
func encodeCreated(w http.ResponseWriter, res api.CreateQuote201JSONResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(appendQuoteEnvelope(nil, res))
}
