package server

// APIFastAnswers counts the API answers the listeners' fast path gave.
func (s *Server) APIFastAnswers() int64 { return s.apiFast.Load() }
