package clitest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/pierhq/pier/internal/testkit/contracttest"
)

// Validated serves h and checks every answer against the contract,
// reporting problems.
func Validated(h http.Handler, report func([]string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		check := r.Clone(r.Context())
		check.Body = io.NopCloser(bytes.NewReader(body))
		resp := rec.Result()
		if p := contracttest.Problems(check, &contracttest.Response{Response: resp, Body: rec.Body.Bytes()}); len(p) > 0 {
			report(p)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// ErrorEnvelope is an error envelope in the contract's shape; extra is
// inserted before its actions (such as a details member and its comma).
func ErrorEnvelope(blockedBy, message string, retryable bool, extra string) string {
	return fmt.Sprintf(`{"blockedBy":%q,"code":%q,"message":%q,"retryable":%t,%s"actions":[{"kind":"stop","reason":"not_implemented"},{"kind":"url","actor":"human","purpose":"documentation","url":"https://pier.example/docs"}],"formatVersion":"1"}`,
		blockedBy, blockedBy, message, retryable, extra)
}

// WriteEnvelope answers with body as JSON.
func WriteEnvelope(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}
