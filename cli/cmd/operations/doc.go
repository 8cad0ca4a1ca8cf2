// Package operations holds one command per contract operation, generated
// into commands.gen.go from openapi/openapi.yaml by internal/tools/gen
// (`make generate`). Each is a cmdutil.NewCmdOperation over the
// operation's spec: its arguments, flags and the table its answer renders
// as. The hand-written commands that chain operations live in the other
// packages under cli/cmd.
package operations
