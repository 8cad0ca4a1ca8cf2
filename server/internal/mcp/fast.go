package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
)

// FastRequest is a POST /mcp that the listener's fast path read itself
// (package fastpath, "API reads"): the header values the endpoint reads,
// each sent at most once and nil when absent, and the whole body.
type FastRequest struct {
	Accept, ContentType, Authorization, ProtocolVersion []byte
	// Origin is set when the request carries an Origin header.
	Origin bool
	Body   []byte
	// RemoteAddr and Host are net/http's Request.RemoteAddr and Host.
	RemoteAddr, Host string
	// ClientIP is the client's address, without its port, as
	// clientaddr resolves it: the peer's, unless a trusted proxy
	// forwarded the request. Empty means the peer's.
	ClientIP string
	// Scratch, when not nil, is a buffer the body may be made in (from
	// Scratch[:0]), which the caller keeps until the body is sent:
	// AnswerFast sets it to the buffer it made the body in.
	Scratch []byte
}

// AnswerFast answers a request the way ServeHTTP would, without net/http,
// when it is a lone message that changes nothing (initialize, ping,
// tools/list, or tools/call of a read-only tool) and ServeHTTP's answer
// is a 200 with a JSON-RPC response: it appends the status line and
// header lines (net/http's, sorted, without Date and the blank line) to
// dst and returns them with the body. ok is false, with nothing written,
// for everything else, which ServeHTTP then answers from the start: only
// a message that reads can be run twice that way, and only a refusal
// (a credential that does not authenticate, the rate limit, a message
// that is not JSON-RPC) is.
func (h *Handler) AnswerFast(dst []byte, q *FastRequest) (head, body []byte, ok bool) {
	if q.Origin || !fastAccept(q.Accept) || string(q.ContentType) != "application/json" ||
		q.ProtocolVersion != nil && !h.versionServed(string(q.ProtocolVersion)) || int64(len(q.Body)) > h.limit {
		return dst, nil, false
	}
	msg := bytes.TrimSpace(q.Body)
	if !loneMessage(msg) {
		return dst, nil, false
	}
	// A message answered before but for its id needs no decoding (it
	// reads); any other must be one that reads.
	p, id := h.prepared.find(msg)
	var m rpcMessage
	if p == nil && (!scanMessage(msg, &m) || !h.onlyReads(&m)) {
		return dst, nil, false
	}
	c := fastCaller(q)
	if _, allowed := h.allow(c); !allowed {
		return dst, nil, false
	}
	if p != nil {
		body, ok = h.answerPrepared(q.Scratch[:0], p, id, c)
		if !ok && !scanMessage(msg, &m) {
			return dst, nil, false // never: msg is a message scanned before but for its id
		}
	}
	if !ok {
		if body, ok = h.answerDecoded(q.Scratch[:0], msg, &m, c); !ok {
			return dst, nil, false
		}
	}
	q.Scratch = body[:0]
	dst = append(dst, "HTTP/1.1 200 OK\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\nContent-Type: application/json\r\n"...)
	return dst, body, true
}

// answerDecoded answers m, decoded from msg, for c as ServeHTTP would,
// appending the body to dst; ok is false when ServeHTTP's answer is not a
// 200 with a JSON-RPC response. A call answered from the REST handler's
// kept answers is kept for the next message like it (preparedCalls).
func (h *Handler) answerDecoded(dst, msg []byte, m *rpcMessage, c caller) (body []byte, ok bool) {
	var header http.Header
	if a := c.authorization; a != nil {
		header = http.Header{"Authorization": {string(a)}}
		if h.authn != nil {
			c.cred = &credCheck{header: header["Authorization"][0]}
		}
	} else {
		header = http.Header{}
	}
	ctx := context.Background()
	c.prep = &preparedNote{}
	resp, invalid, unauthenticated := h.handleDecoded(ctx, m, false, header, c)
	if invalid != "" || unauthenticated || resp == nil || h.settle(ctx, c) != nil {
		return nil, false
	}
	h.prepared.keep(msg, m, c.prep)
	body = append(append(dst, resp...), '\n')
	if cap(resp) <= maxPooledAnswer {
		answerBufs.Put(&resp)
	}
	return body, true
}

// fastCaller is the caller of q, as ServeHTTP makes it, less the
// deferred credential check (answerDecoded adds it).
func fastCaller(q *FastRequest) caller {
	c := caller{remoteAddr: q.RemoteAddr, host: q.Host, authorization: q.Authorization, ip: q.ClientIP}
	peer, port, err := net.SplitHostPort(q.RemoteAddr)
	switch {
	case err != nil:
		if c.ip == "" {
			c.ip = q.RemoteAddr
		}
	case c.ip == "":
		c.ip = peer
	case c.ip != peer:
		// As clientaddr.RemoteAddr has it.
		c.remoteAddr = net.JoinHostPort(c.ip, port)
	}
	if a := q.Authorization; a != nil {
		sum := sha256.Sum256(a)
		var k [len("cred:") + 24]byte
		copy(k[:], "cred:")
		hex.Encode(k[len("cred:"):], sum[:12])
		c.key = string(k[:])
		return c
	}
	c.key = "ip:" + c.ip
	return c
}

// fastAccept is the Accept header MCP clients send, which acceptsBoth
// takes without parsing.
func fastAccept(v []byte) bool {
	return string(v) == "application/json, text/event-stream" || string(v) == "text/event-stream, application/json"
}

// versionServed reports whether ServeHTTP serves a request naming this
// MCP-Protocol-Version (see firstStatelessVersion).
func (h *Handler) versionServed(v string) bool {
	return v == "" || v == ProtocolVersion || v >= firstStatelessVersion
}

// onlyReads reports whether a message, decoded by scanMessage, is one
// whose running changes nothing: initialize, ping, tools/list, or
// tools/call of a read-only tool.
func (h *Handler) onlyReads(m *rpcMessage) bool {
	switch m.Method {
	case "initialize", "ping", "tools/list":
		return true
	case "tools/call":
		if m.Params == nil || m.Params.Name == nil {
			return false
		}
		t, ok := h.tools[*m.Params.Name]
		return ok && t.keepShape
	}
	return false
}
