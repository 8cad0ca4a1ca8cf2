package mcp

import (
	"bytes"
	"hash/maphash"
	"net/http"

	"github.com/pierhq/pier/internal/lib/jsonscan"
	"github.com/pierhq/pier/server/internal/cache"
)

// preparedCalls are the answers of tools/call messages the listener's
// fast path answered from the REST handler's kept answers (a read-only
// tool whose operation anyone may call, answered the same to every
// caller), kept by the message less its id. A message that is one of them
// but for its id is answered by asking the REST handler's kept answers
// again, which checks the caller's key and takes from its bucket as
// before, and splicing the message's id into the result made before; it
// skips decoding the message and its arguments and encoding the result.
//
// The result stands only while the REST answer it encodes is the one the
// REST handler keeps: another (a write bumped the version, the answer
// aged or was dropped) makes the result again, so a prepared answer goes
// stale exactly when REST's does. A caller REST's kept answers do not
// answer (a revoked key, an OAuth token, a bucket run out) gets the call
// the whole way, as before.
type preparedCalls struct {
	seed maphash.Seed
	c    *cache.Cache[uint64, *preparedCall]
}

// preparedCall is one kept answer, never changed once kept.
type preparedCall struct {
	// prefix and suffix are the message around its id's value: prefix
	// ends with the id member's name, colon and any space.
	prefix, suffix []byte
	preparedNote
}

// preparedNote is what a call tells the fast path about its answer, for
// keeping it: the REST answer it encodes, when it came from the REST
// handler's kept answers.
type preparedNote struct {
	tool *compiledTool
	rs   *requestShape
	// rest is the REST handler's kept answer (the slice it gives) that
	// result, the tools/call result, encodes.
	rest, result []byte
}

func newPreparedCalls(max int) *preparedCalls {
	return &preparedCalls{seed: maphash.MakeSeed(), c: cache.New(max, 8<<20, func(_ uint64, p *preparedCall) int64 {
		return int64(len(p.prefix)+len(p.suffix)+len(p.result)) + 160
	})}
}

// idSpan finds the value of a message's id member the quick way: after
// the first `"id":` in it. It is the id only if decoding the message says
// so (keep checks), and a message that matches a kept one around it has
// its first `"id":` in the same place, the bytes before it being the same.
// ok is false unless the value is a string or a number.
func idSpan(msg []byte) (start, end int, ok bool) {
	i := bytes.Index(msg, []byte(`"id":`))
	if i < 0 {
		return 0, 0, false
	}
	start = jsonscan.Space(msg, i+5)
	if start >= len(msg) {
		return 0, 0, false
	}
	switch msg[start] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		return 0, 0, false
	}
	end = jsonscan.Value(msg, start)
	return start, end, end > start
}

// key is the cache's key for a message around its id; entries are
// compared in full, so the two halves' hashes are only mixed.
func (pc *preparedCalls) key(prefix, suffix []byte) uint64 {
	return maphash.Bytes(pc.seed, prefix) ^ maphash.Bytes(pc.seed, suffix)*0x9e3779b97f4a7c15
}

// find returns the kept answer of a message that is a kept one but for
// its id, with the message's id; nil when there is none. The id found
// is a whole string or number, and the bytes around it are those of a
// message decoded before, so the message is that one with another id.
func (pc *preparedCalls) find(msg []byte) (p *preparedCall, id []byte) {
	start, end, ok := idSpan(msg)
	if !ok {
		return nil, nil
	}
	prefix, suffix := msg[:start], msg[end:]
	p, ok = pc.c.Get(pc.key(prefix, suffix))
	if !ok || !bytes.Equal(p.prefix, prefix) || !bytes.Equal(p.suffix, suffix) {
		return nil, nil
	}
	return p, msg[start:end]
}

// keep keeps the answer a call noted for msg, a message decoded into m,
// when idSpan finds m's id.
func (pc *preparedCalls) keep(msg []byte, m *rpcMessage, n *preparedNote) {
	if n.result == nil || n.tool.needsAgent || len(msg) > 4096 {
		return
	}
	start, end, ok := idSpan(msg)
	if !ok || len(m.ID) != end-start || &m.ID[0] != &msg[start] {
		return
	}
	pc.put(&preparedCall{prefix: bytes.Clone(msg[:start]), suffix: bytes.Clone(msg[end:]), preparedNote: *n})
}

func (pc *preparedCalls) put(p *preparedCall) { pc.c.Put(pc.key(p.prefix, p.suffix), p) }

// answerPrepared answers p's message with id from the REST handler's
// kept answer, as call would, appending the body (the JSON-RPC response
// and a newline) to dst. ok is false, with nothing taken from any bucket,
// when the REST handler does not answer the call so.
func (h *Handler) answerPrepared(dst []byte, p *preparedCall, id []byte, c caller) (body []byte, ok bool) {
	rest, ok := h.answerKept(p.tool, p.rs, nil, c)
	if !ok {
		return nil, false
	}
	result := p.result
	if !sameAnswer(p.rest, rest) {
		result = toolResult(nil, http.StatusOK, "application/json", rest)
		again := *p
		again.rest, again.result = rest, result
		h.prepared.put(&again)
	}
	h.preparedAnswers.Add(1)
	body = append(dst, `{"jsonrpc":"2.0","id":`...)
	body = append(body, id...)
	body = append(body, `,"result":`...)
	body = append(body, result...)
	return append(body, '}', '\n'), true
}

// sameAnswer reports whether a REST answer is the kept one: the REST
// handler gives the same slice for as long as it keeps it, and the
// prepared answer holding that slice keeps any other from its place.
func sameAnswer(kept, body []byte) bool {
	if len(kept) != len(body) {
		return false
	}
	return len(body) == 0 || &kept[0] == &body[0] || bytes.Equal(kept, body)
}

// PreparedAnswers counts the tools/call messages answered from prepared
// answers (preparedCalls).
func (h *Handler) PreparedAnswers() int64 { return h.preparedAnswers.Load() }
