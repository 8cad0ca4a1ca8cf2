package capabilities

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/openapi"
	"github.com/pierhq/pier/sdk"
)

// Capability is one operation as an agent plans with it.
type Capability struct {
	Operation string `json:"operation"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	// Command is the pier command line that calls it, "" when none does.
	Command string `json:"command"`
	// MCPTool is the MCP tool's name, "" when it is no tool.
	MCPTool string `json:"mcpTool"`
	// Authority is who may call it: anonymous, agent, holder or
	// sandbox_agent; Scopes are the key scopes an agent needs.
	Authority string   `json:"authority"`
	Scopes    []string `json:"scopes"`
	// ReadOnly operations change nothing: GETs and those the contract
	// marks readOnly (estimate, wait_for_message…).
	ReadOnly bool `json:"readOnly"`
	// Idempotent operations are safe to retry: read-only ones, those the
	// contract marks idempotent (a repeat acts no more than once), and those
	// taking an Idempotency-Key when the retry sends the same key.
	Idempotent bool `json:"idempotent"`
	// IdempotencyKey operations take an Idempotency-Key: a retry with the
	// same key and body replays the first answer.
	IdempotencyKey bool `json:"idempotencyKey"`
	// InputRequired operations can answer with a task waiting for a human
	// (the CLI exits 5 with the approval URL).
	InputRequired bool `json:"inputRequired"`
	// Required names the arguments it cannot go without.
	Required []string `json:"required"`
}

// Capabilities lists every operation of the contract with the command and
// tool that call it, from the generated operation table.
func Capabilities(root *cobra.Command) []Capability {
	out := make([]Capability, 0, len(sdk.Operations))
	for _, op := range sdk.Operations {
		hints := mcpHints()[op.ID]
		readOnly := op.Method == "GET" || op.Method == "HEAD" || hints.ReadOnly
		c := Capability{Operation: op.ID, Method: op.Method, Path: op.Path, MCPTool: op.MCPTool, Authority: op.Authority,
			Scopes: []string{}, ReadOnly: readOnly, Idempotent: readOnly || hints.Idempotent || op.Idempotent, IdempotencyKey: op.Idempotent,
			InputRequired: op.InputRequired, Required: op.Required}
		if c.Required == nil {
			c.Required = []string{}
		}
		if op.Scope != "" {
			c.Scopes = []string{op.Scope}
		}
		if cmd := cmdutil.FindOperationCommand(root, op.ID); cmd != nil {
			c.Command = strings.TrimSpace(cmd.CommandPath() + " " + argUse(cmd))
		}
		out = append(out, c)
	}
	return out
}

// mcpHint is what the contract's x-mcp says of an operation.
type mcpHint struct {
	ReadOnly   bool `json:"readOnly"`
	Idempotent bool `json:"idempotent"`
}

// mcpHints reads every operation's x-mcp hints from the embedded contract.
var mcpHints = sync.OnceValue(func() map[string]mcpHint {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	out := map[string]mcpHint{}
	if json.Unmarshal(openapi.JSON, &doc) != nil {
		return out
	}
	for _, item := range doc.Paths {
		for _, raw := range item {
			var op struct {
				OperationID string  `json:"operationId"`
				MCP         mcpHint `json:"x-mcp"`
			}
			if json.Unmarshal(raw, &op) == nil && op.OperationID != "" {
				out[op.OperationID] = op.MCP
			}
		}
	}
	return out
})

// argUse is the positional part of a command's use line, such as <id>.
func argUse(cmd *cobra.Command) string {
	_, rest, _ := strings.Cut(cmd.Use, " ")
	return rest
}

// CapabilitiesOptions are `pier capabilities`'s.
type CapabilitiesOptions struct {
	IO   *cmdutil.IOStreams
	Root *cobra.Command
	JSON bool
}

// NewCmdCapabilities is `pier capabilities`.
func NewCmdCapabilities(f *cmdutil.Factory, runF func(*CapabilitiesOptions) error) *cobra.Command {
	opts := &CapabilitiesOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "capabilities",
		Short: "List every operation with its command, MCP tool, scopes, idempotency and human gates",
		Long: `List every operation of the contract: the pier command and MCP tool that
call it, who may call it and with which key scopes, whether it changes
nothing (readOnly), whether a retry is safe (idempotent) and whether that
needs an Idempotency-Key (idempotencyKey: a retry with the same key replays
the first answer), whether its answer can be a task waiting for a human
(input_required, exit code 5), and the arguments it cannot go without. An agent can plan from --json without
reading help text.`,
		Example: `  pier capabilities
  pier capabilities --json | jq '.operations[] | select(.inputRequired)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.Config.JSON
			opts.Root = cmd.Root()
			if runF != nil {
				return runF(opts)
			}
			return capabilities(opts)
		},
	}
	return cmd
}

func capabilities(o *CapabilitiesOptions) error {
	caps := Capabilities(o.Root)
	if o.JSON {
		b, err := json.MarshalIndent(map[string]any{"operations": caps}, "", "  ")
		if err != nil {
			return err
		}
		return cmdutil.WriteRaw(o.IO.Out, b)
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tCOMMAND\tMCP TOOL\tAUTHORITY\tSCOPES\tIDEMPOTENT\tHUMAN GATE")
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "-"
	}
	idempotent := func(c Capability) string {
		switch {
		case c.ReadOnly:
			return "yes (read-only)"
		case c.IdempotencyKey:
			return "with key"
		}
		return yes(c.Idempotent)
	}
	for _, c := range caps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Operation, or(c.Command, "-"), or(c.MCPTool, "-"), c.Authority,
			or(strings.Join(c.Scopes, ","), "-"), idempotent(c), yes(c.InputRequired))
	}
	return tw.Flush()
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
