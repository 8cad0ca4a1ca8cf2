package server

// APIFastAnswers counts the API answers the listeners' fast path gave.
func (s *Server) APIFastAnswers() int64 { return s.apiFast.Load() }

// MCPPreparedAnswers counts the tools/call messages the MCP endpoint
// answered from prepared answers.
func (s *Server) MCPPreparedAnswers() int64 { return s.mcp.PreparedAnswers() }
