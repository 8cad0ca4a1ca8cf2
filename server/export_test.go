package server

import "github.com/pierhq/pier/server/internal/edge/fastpath"

// APIFastAnswers counts the API answers the listeners' fast path gave.
func (s *Server) APIFastAnswers() int64 { return s.apiFast.Load() }

// MCPPreparedAnswers counts the tools/call messages the MCP endpoint
// answered from prepared answers.
func (s *Server) MCPPreparedAnswers() int64 { return s.mcp.PreparedAnswers() }

// APIRead is what the listeners' fast path asks for an API request.
func (s *Server) APIRead(dst []byte, q *fastpath.APIRequest) (head, body []byte, ok bool) {
	return s.apiRead(dst, q)
}
