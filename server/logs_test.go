package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pierhq/pier/server/internal/edge"
)

// A 503 the edge marks expected (a worker answers no HTTP) is logged at
// INFO; any other 5xx at ERROR.
func TestExpected503LoggedAtInfo(t *testing.T) {
	for _, c := range []struct {
		expected bool
		want     string
	}{{true, "level=INFO"}, {false, "level=ERROR"}} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		h := logRequests(log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.expected {
				edge.MarkExpected(w)
			}
			http.Error(w, "down", http.StatusServiceUnavailable)
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		if !strings.Contains(buf.String(), c.want) || !strings.Contains(buf.String(), "status=503") {
			t.Errorf("expected=%v: %s", c.expected, buf.String())
		}
	}
}
