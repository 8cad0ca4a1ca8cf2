package server

import "context"

// openSandbox loads the sandbox's keys (created on first use) and publishes
// the reference release when none is published yet, as a first start does.
// A failed publication leaves the manifest pending and the server running.
func (s *Server) openSandbox(ctx context.Context) error {
	sb, err := newSandbox(ctx, s.cfg, s.store, s.log, s.BaseURL)
	if err != nil {
		return err
	}
	s.sandbox = sb
	if err := sb.EnsureReference(ctx); err != nil {
		s.log.Error("publishing the sandbox reference release; the manifest stays pending", "err", err)
	}
	return nil
}
