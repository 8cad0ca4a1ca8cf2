package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
)

// FormatVersion is the envelope format version.
const FormatVersion = models.N1

func notImplemented(op string) error {
	return apierr.Newf("plan:not_implemented", "%s is in the contract but this deployment does not serve it yet", op).
		WithActions(actions.Stop("not_implemented"))
}

// defaultActions gives every error a way forward when its producer named none.
func defaultActions(e *apierr.Error, op string) []models.Action {
	switch e.Code.Namespace() {
	case "auth":
		if e.Code == "auth:insufficient_scope" {
			return []models.Action{actions.Manual("grant_scope", "human")}
		}
		if e.Code == "auth:agent_authority_refused" {
			return []models.Action{actions.Manual("wait_for_human", "holder")}
		}
		return []models.Action{actions.Manual("create_key", "human")}
	case "rate", "internal", "idempotency":
		if e.Code == "idempotency:key_reused" {
			return []models.Action{actions.Manual("fix_input", "agent")}
		}
		if op != "" {
			after := e.RetryAfterSeconds
			if after == 0 {
				after = 1
			}
			return []models.Action{actions.Retry(op, "agent", nil, after)}
		}
		if e.Code.Namespace() == "internal" {
			// Retryable, but with no operation to name: a person asks
			// the operator, rather than a stop that says it is over.
			return []models.Action{actions.Manual(models.ContactOperator, "human")}
		}
	case "input":
		if e.Code == "input:not_acceptable" || e.Code == "input:unsupported_media_type" {
			return []models.Action{actions.Manual("upgrade_client", "agent")}
		}
		return []models.Action{actions.Manual("fix_input", "agent")}
	case "not_found":
		return []models.Action{actions.Stop("not_found")}
	case "plan":
		if e.Code == "plan:not_implemented" {
			return []models.Action{actions.Stop("not_implemented")}
		}
		return []models.Action{actions.Manual("fix_input", "agent")}
	case "budget":
		return []models.Action{actions.Manual("raise_budget", "human")}
	case "policy":
		return []models.Action{actions.Manual("change_policy", "human")}
	case "approval":
		return []models.Action{actions.Manual("wait_for_human", "human")}
	}
	return []models.Action{actions.Stop("terminal_error")}
}

// ErrorEnvelope renders e as the contract's error envelope.
func ErrorEnvelope(e *apierr.Error, op string) models.ErrorEnvelope {
	acts := e.Actions
	if len(acts) == 0 {
		acts = defaultActions(e, op)
	}
	code := e.Code
	env := models.ErrorEnvelope{
		BlockedBy:     e.Code,
		Code:          &code,
		Message:       e.Message,
		Retryable:     e.Retryable(),
		Actions:       acts,
		FormatVersion: FormatVersion,
	}
	if len(e.Details) > 0 {
		d := e.Details
		env.Details = &d
	}
	return env
}

// WriteError writes the error envelope with the contract's status.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := apierr.As(err)
	op := ""
	if o, ok := opFromContext(r.Context()); ok {
		op = o.ID
	}
	if e.Code.Namespace() == "internal" && log != nil {
		log.ErrorContext(r.Context(), "request failed", "op", op, "err", e.Cause, "code", e.Code)
	}
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = vs
	}
	if e.RetryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds))
	}
	writeJSON(w, e.Status(), ErrorEnvelope(e, op))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"blockedBy":"internal:error","message":"encoding failed","retryable":true,"actions":[{"kind":"stop","reason":"terminal_error"}],"formatVersion":"1"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
