package server

import (
	"net/http"

	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/store"
)

// versionedReads are the reads the API keeps while the store's version for
// them holds (httpapi.Config.Versions).
func versionedReads(st *store.Store) map[string]func() uint64 {
	return map[string]func() uint64{"search_domains": st.DomainsVersion}
}

// Keeping says, for the operation table (internal/tools/optable), how the API
// answers an operation without running it: from an answer it keeps (a
// pure read, or a versioned one while its version holds), and whether the
// listener's fast path answers it too. It builds the API as the server
// does, without a store behind it.
func Keeping() (func(id string) (kept, versioned, fast bool), error) {
	h, err := httpapi.New(httpapi.Config{Versions: versionedReads(nil),
		Extra: map[string]http.Handler{"mcp": http.NotFoundHandler()}})
	if err != nil {
		return nil, err
	}
	return h.Keeping, nil
}
