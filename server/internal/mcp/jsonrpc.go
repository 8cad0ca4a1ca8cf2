package mcp

// The JSON-RPC layer is written here by hand rather than served by the Go
// MCP SDK's StreamableHTTPHandler. Pier needs only initialize, ping,
// tools/list, tools/call and notifications, statelessly, with JSON answers,
// and the SDK fought that design:
//
//   - It builds a server session per request (goroutines, channels and a
//     JSON decoder with large buffers), which made a tools/call cost four
//     times the REST request it wraps; the benchmark goal is half.
//   - Its HTTP refusals are plain text (400 where the SPEC says 406), its
//     Host check refuses any proxied loopback deployment, and MCPGODEBUG
//     switches in the environment can bring Mcp-Session-Id back.
//   - It negotiates newer protocols than 2025-03-26 unless narrowed, and
//     runs the 2026-07-28 discovery path besides.
//
// The initialize and tools/list answers use copies of the SDK's protocol
// types (see initializeResult), and its client is what the tests connect
// with.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
)

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	// codeRateLimited is a server error (JSON-RPC reserves -32000 to
	// -32099 for them): the entry was not run.
	codeRateLimited = -32029
)

// messageID reads a message's id, when it has a valid one.
func messageID(raw json.RawMessage) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &m) != nil || !validID(m.ID) {
		return nil
	}
	return m.ID
}

// rpcMessage is any JSON-RPC message a client sends: a request (method and
// id), a notification (method, no id) or a response (result or error, no
// method). Params holds the union of the fields the served methods read, so
// that one pass decodes the message.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  *rpcParams      `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type rpcParams struct {
	// initialize
	ProtocolVersion *string `json:"protocolVersion"`
	// tools/call
	Name      *string         `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// serveJSONRPC answers one POST body: a message or, as 2025-03-26 allows, a
// batch of them. A body that is only notifications and responses gets 202.
// A body that is not JSON-RPC at all, or a lone message that is not a valid
// request, is refused at the HTTP level with the returned error, which the
// transport allows; inside a batch the same mistake is a JSON-RPC error.
func (h *Handler) serveJSONRPC(ctx context.Context, w http.ResponseWriter, body []byte, header http.Header, c caller) *apierr.Error {
	body = bytes.TrimSpace(body)
	// A lone message is checked by decoding it (json.Unmarshal checks the
	// syntax first), so that the common case reads it once.
	single := len(body) > 0 && body[0] == '{'
	if !single && !json.Valid(body) {
		writeParseError(w)
		return nil
	}
	if body[0] == '[' {
		out, e := h.runBatch(ctx, body, header, c)
		if e != nil {
			return e
		}
		writeBatch(w, out)
		return nil
	}
	if secs, ok := h.allow(c); !ok {
		if e := h.settle(ctx, c); e != nil {
			return e
		}
		e := apierr.Newf("rate:limited", "rate limit for MCP messages exhausted; retry in %d s", secs).
			WithActions(actions.Retry("mcp", "agent", nil, secs))
		e.RetryAfterSeconds = secs
		return e
	}
	resp, invalid, unauthenticated := h.handleMessage(ctx, body, header, c)
	if e := h.settle(ctx, c); e != nil {
		return e
	}
	if unauthenticated {
		return h.credentialsRequired()
	}
	if invalid != "" {
		if single && !json.Valid(body) {
			writeParseError(w)
			return nil
		}
		return notJSONRPC(invalid)
	}
	if resp == nil {
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(resp)+1))
	w.WriteHeader(http.StatusOK)
	b := append(resp, '\n')
	w.Write(b)
	if cap(b) <= maxPooledAnswer {
		answerBufs.Put(&b)
	}
	return nil
}

// runBatch runs a batch's messages in order, each charged to the caller's
// bucket as a single message is, and returns their answers. A batch too
// large, empty, or needing credentials it lacks is refused whole, before
// any of it runs.
func (h *Handler) runBatch(ctx context.Context, body []byte, header http.Header, c caller) ([][]byte, *apierr.Error) {
	if int64(len(body)) > h.maxBatchB {
		return nil, apierr.Newf("input:body_too_large", "a batch may hold at most %d bytes; send its messages in smaller batches or one by one", h.maxBatchB)
	}
	var raws []json.RawMessage
	if json.Unmarshal(body, &raws) != nil || len(raws) == 0 {
		return nil, notJSONRPC("a batch must hold at least one message")
	}
	if len(raws) > h.maxBatch {
		return nil, apierr.Newf("input:invalid", "a batch may hold at most %d messages; this one holds %d", h.maxBatch, len(raws)).
			WithDetails(models.FieldProblem{Field: "body", Problem: fmt.Sprintf("more than %d messages", h.maxBatch)})
	}
	if header.Get("Authorization") == "" {
		for _, raw := range raws {
			if h.needsCredentials(raw) {
				return nil, h.credentialsRequired()
			}
		}
	}
	var out [][]byte
	for _, raw := range raws {
		if secs, ok := h.allow(c); !ok {
			out = append(out, errorResponse(messageID(raw), codeRateLimited, fmt.Sprintf("rate limited: retry in %d s", secs)))
			continue
		}
		resp, invalid, _ := h.handleMessage(ctx, raw, header, c)
		if invalid != "" {
			resp = errorResponse(nil, codeInvalidRequest, invalid)
		}
		if resp != nil {
			out = append(out, resp)
		}
	}
	return out, nil
}

// writeBatch writes a batch's answers as one JSON array, or 202 when
// there are none.
func writeBatch(w http.ResponseWriter, out [][]byte) {
	if len(out) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, r := range out {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(r)
	}
	buf.WriteString("]\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

// writeParseError answers a body that is not JSON: JSON-RPC 2.0 §5.1's
// -32700 with a null id, since no id could be read.
func writeParseError(w http.ResponseWriter) {
	b := append(errorResponse(nil, codeParseError, "Parse error: the body is not JSON; send one JSON-RPC 2.0 message or a batch of them"), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusBadRequest)
	w.Write(b)
}

func notJSONRPC(problem string) *apierr.Error {
	return apierr.Newf("input:invalid", "not a valid JSON-RPC 2.0 request: %s", problem).
		WithDetails(models.FieldProblem{Field: "body", Problem: problem})
}

// needsCredentials reports whether a message is a call of a tool that takes
// an agent's credentials.
func (h *Handler) needsCredentials(raw json.RawMessage) bool {
	var m rpcMessage
	decodeMessage(raw, &m)
	if m.Method != "tools/call" || m.Params == nil || m.Params.Name == nil {
		return false
	}
	t, ok := h.tools[*m.Params.Name]
	return ok && t.needsAgent
}

// handleMessage answers one message; a nil answer means nothing to answer.
// A message that is not a valid request is described by invalid instead
// (JSON-RPC's -32600), since its id cannot be trusted. unauthenticated
// means a call of a tool that needs an agent's credentials came without
// any: nothing ran, and the transport answers 401 so that the client can
// sign in.
func (h *Handler) handleMessage(ctx context.Context, raw json.RawMessage, header http.Header, c caller) (answer []byte, invalid string, unauthenticated bool) {
	var m rpcMessage
	badParams := false
	if err := decodeMessage(raw, &m); err != nil {
		// A mistyped member still leaves the others decoded; only params may
		// be wrong for the request to deserve an answer to its id.
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || !strings.HasPrefix(te.Field, "params") {
			return nil, "not a JSON-RPC 2.0 message object", false
		}
		badParams = true
	}
	return h.handleDecoded(ctx, &m, badParams, header, c)
}

// handleDecoded is handleMessage once the message is decoded into m;
// badParams says its params had a member of the wrong type.
func (h *Handler) handleDecoded(ctx context.Context, m *rpcMessage, badParams bool, header http.Header, c caller) (answer []byte, invalid string, unauthenticated bool) {
	id := m.ID
	if len(id) > 0 && !validID(id) {
		return nil, "id must be a string or a number", false
	}
	if m.JSONRPC != "2.0" {
		return nil, `jsonrpc must be "2.0"`, false
	}
	if m.Method == "" {
		if len(id) > 0 && (m.Result != nil || m.Error != nil) {
			return nil, "", false // a response to a request this server never sends
		}
		return nil, "a request needs a method", false
	}
	if len(id) == 0 {
		return nil, "", false // notifications (initialized, cancelled, …) need no answer
	}
	p := m.Params
	if p == nil {
		p = &rpcParams{}
	}

	switch m.Method {
	case "initialize":
		if badParams || p.ProtocolVersion == nil {
			return errorResponse(id, codeInvalidParams, "initialize needs params.protocolVersion, a string"), "", false
		}
		// Whatever the client asked for, the answer is the one version Pier
		// speaks; a client that cannot speak it disconnects.
		return resultResponse(id, h.initializeResult), "", false
	case "ping":
		return resultResponse(id, []byte(`{}`)), "", false
	case "tools/list":
		return resultResponse(id, h.toolsList), "", false
	case "tools/call":
		if badParams || p.Name == nil || !objectOrNull(p.Arguments) {
			return errorResponse(id, codeInvalidParams, "tools/call needs params.name, a string, and params.arguments, an object"), "", false
		}
		t, ok := h.tools[*p.Name]
		if !ok {
			return errorResponse(id, codeInvalidParams, "unknown tool "+strconv.Quote(*p.Name)+"; tools/list names them"), "", false
		}
		if t.needsAgent && header.Get("Authorization") == "" {
			return nil, "", true
		}
		res, err := h.call(ctx, resultPrefix(id), t, p.Arguments, header, c)
		if err != nil {
			h.log.ErrorContext(ctx, "tools/call failed", "tool", t.Name, "err", err)
			return errorResponse(id, codeInternal, "the tool call could not be dispatched"), "", false
		}
		return append(res, '}'), "", false
	}
	return errorResponse(id, codeMethodNotFound, "method "+strconv.Quote(m.Method)+" is not served; Pier offers initialize, ping, tools/list and tools/call"), "", false
}

// objectOrNull reports whether arguments are absent, null or an object.
func objectOrNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || raw[0] == '{' || string(raw) == "null"
}

// validID accepts what MCP allows as a request id: a string or a number.
// id is a value of a message whose syntax was checked (by decodeMessage,
// or json.Unmarshal), so its first byte tells its kind.
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// resultPrefix starts a response whose result the caller appends, before
// closing it with '}'.
func resultPrefix(id json.RawMessage) []byte {
	b := (*answerBufs.Get().(*[]byte))[:0]
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	return append(b, `,"result":`...)
}

// answerBufs holds the buffers answers are built in; a lone message's
// answer goes back once written. Buffers past maxPooledAnswer are left to
// the garbage collector, so the pool holds small ones only.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledAnswer = 64 << 10

func resultResponse(id json.RawMessage, result []byte) []byte {
	return append(append(resultPrefix(id), result...), '}')
}

func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	e, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg})
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	b = append(b, `,"error":`...)
	b = append(b, e...)
	return append(b, '}')
}

// staticResults encodes the answers that never change, once: initialize
// and tools/list.
func staticResults(version string, tools []*compiledTool) (initialize, list []byte, err error) {
	initialize, err = json.Marshal(&initializeResult{
		ProtocolVersion: ProtocolVersion,
		// Tools only, and a fixed list, so no listChanged notifications.
		Capabilities: &serverCapabilities{Tools: &toolCapabilities{}},
		ServerInfo:   &implementation{Name: "pier", Title: "Pier", Version: version},
		Instructions: instructions,
	})
	if err != nil {
		return nil, nil, err
	}
	descs := make([]*toolDescriptor, len(tools))
	for i, t := range tools {
		descs[i] = t.descriptor()
	}
	list, err = json.Marshal(&listToolsResult{Tools: descs})
	return initialize, list, err
}

// The results of initialize and tools/list, field for field (and in the
// same order) as the MCP Go SDK's protocol types that Pier answered with
// before (github.com/modelcontextprotocol/go-sdk/mcp: InitializeResult,
// ServerCapabilities, ToolCapabilities, Implementation, ListToolsResult,
// Tool, ToolAnnotations), less the fields Pier never sets. The server does
// not link the SDK, whose package inits (gob registrations, jsonschema-go)
// every pier command paid for at start; TestStaticResultsMatchTheSDK keeps
// the bytes equal to the SDK's.
type (
	initializeResult struct {
		Capabilities    *serverCapabilities `json:"capabilities"`
		Instructions    string              `json:"instructions,omitempty"`
		ProtocolVersion string              `json:"protocolVersion"`
		ServerInfo      *implementation     `json:"serverInfo"`
	}
	serverCapabilities struct {
		Tools *toolCapabilities `json:"tools,omitempty"`
	}
	toolCapabilities struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}
	implementation struct {
		Name    string `json:"name"`
		Title   string `json:"title,omitempty"`
		Version string `json:"version"`
	}
	listToolsResult struct {
		// The SDK's Cacheable: never omitted, so sent as 0 and "".
		TTLMs      int               `json:"ttlMs"`
		CacheScope string            `json:"cacheScope"`
		NextCursor string            `json:"nextCursor,omitempty"`
		Tools      []*toolDescriptor `json:"tools"`
	}
	toolDescriptor struct {
		Annotations *toolAnnotations `json:"annotations,omitempty"`
		Description string           `json:"description,omitempty"`
		InputSchema json.RawMessage  `json:"inputSchema"`
		Name        string           `json:"name"`
		Title       string           `json:"title,omitempty"`
	}
	toolAnnotations struct {
		DestructiveHint *bool  `json:"destructiveHint,omitempty"`
		IdempotentHint  bool   `json:"idempotentHint"`
		ReadOnlyHint    bool   `json:"readOnlyHint"`
		Title           string `json:"title,omitempty"`
	}
)

const instructions = `Pier publishes static sites and launches services under budgets and policy set by humans. ` +
	`Every tool is a Pier operation and returns Pier's envelope as structuredContent and as JSON text: ` +
	`on success {data, actions, formatVersion}; on refusal isError with {blockedBy, message, retryable, actions}. ` +
	`Follow the typed actions; never invent next steps. Authenticate with the HTTP header Authorization: Bearer agk_… ` +
	`or with an OAuth access token (the 401 challenge names the metadata to sign in with); ` +
	`search_domains and estimate need no credentials.`
