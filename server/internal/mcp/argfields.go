package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/pierhq/pier/models"
)

// argumentFields renames, in a REST refusal's details, the fields the REST
// validator names by where they sit in the request (body.email, query.q,
// path.id, header.Idempotency-Key) to the tool's argument that carries
// them (arguments.email, …), as the MCP layer's own argument errors name
// them: an agent fixes the argument it sent. Only a refusal (4xx) with
// details is decoded and written again, as the REST handler writes it;
// anything else is body as it is.
func argumentFields(t *compiledTool, status int, body []byte) []byte {
	if status < http.StatusBadRequest || status >= http.StatusInternalServerError || !bytes.Contains(body, []byte(`"details"`)) {
		return body
	}
	var env models.ErrorEnvelope
	if json.Unmarshal(body, &env) != nil || env.Details == nil {
		return body
	}
	changed := false
	for i, d := range *env.Details {
		if f, ok := t.argumentField(d.Field); ok {
			if strings.HasPrefix(env.Message, d.Field+":") {
				env.Message = f + env.Message[len(d.Field):]
			}
			(*env.Details)[i].Field, changed = f, true
		}
	}
	if !changed {
		return body
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(env) != nil {
		return body
	}
	return buf.Bytes()
}

// argumentField is the argument path for a REST field path of t's
// request ("body.items[0].kind" is "arguments.items[0].kind" when items is
// a body argument), or ok false when no argument of t carries it.
func (t *compiledTool) argumentField(field string) (string, bool) {
	in, rest, ok := strings.Cut(field, ".")
	if !ok || rest == "" {
		return "", false
	}
	name := rest
	if i := strings.IndexAny(rest, ".["); i >= 0 {
		name = rest[:i]
	}
	for _, b := range t.Arguments {
		switch {
		case b.In != in:
		case in == "header" && strings.EqualFold(headerName(b.Name), name):
			return "arguments." + b.Name + rest[len(name):], true
		case in != "header" && b.Name == name:
			return "arguments." + rest, true
		}
	}
	return "", false
}
