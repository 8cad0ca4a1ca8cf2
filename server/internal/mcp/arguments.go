package mcp

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/apierr"
)

var printer = message.NewPrinter(language.English)

// argumentError turns a schema violation into the error REST gives for the
// same mistake: input:unknown_field for an argument the tool does not
// define, input:invalid otherwise, with one detail per problem. Fields are
// named from the arguments object down, as REST names them from "body" or
// "query".
func argumentError(err error) *apierr.Error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return apierr.Newf("input:invalid", "the arguments do not match the tool's inputSchema: %v", err)
	}
	code := models.BlockedBy("input:invalid")
	var details []models.FieldProblem
	var visit func(e *jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				visit(c)
			}
			return
		}
		field := strings.Join(append([]string{"arguments"}, e.InstanceLocation...), ".")
		switch k := e.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			code = "input:unknown_field"
			for _, p := range k.Properties {
				details = append(details, models.FieldProblem{Field: field + "." + p, Problem: "unknown argument"})
			}
		case *kind.Required:
			for _, p := range k.Missing {
				details = append(details, models.FieldProblem{Field: field + "." + p, Problem: "missing required argument"})
			}
		default:
			details = append(details, models.FieldProblem{Field: field, Problem: e.ErrorKind.LocalizedString(printer)})
		}
	}
	visit(ve)
	if len(details) == 0 {
		details = []models.FieldProblem{{Field: "arguments", Problem: ve.Error()}}
	}
	sort.SliceStable(details, func(i, j int) bool { return details[i].Field < details[j].Field })
	msg := fmt.Sprintf("%s: %s", details[0].Field, details[0].Problem)
	if len(details) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(details)-1)
	}
	return apierr.New(code, msg).WithDetails(details...)
}
