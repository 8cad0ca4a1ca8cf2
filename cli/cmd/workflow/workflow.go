package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/internal/lib/workflowplan"
	"github.com/pierhq/pier/sdk"
)

// AddCommands gives the workflows group (`pier workflow` too, an alias
// the client's tree gives it) the hand-written commands: prepare from a
// file, in place of the generated one, and an offline verify.
func AddCommands(root *cobra.Command, f *cmdutil.Factory) {
	workflows := cmdutil.Subcommand(root, "workflows")
	if workflows == nil {
		return
	}
	if prepare := cmdutil.Subcommand(workflows, "prepare"); prepare != nil {
		workflows.RemoveCommand(prepare)
	}
	workflows.AddCommand(NewCmdWorkflowPrepare(f, nil), NewCmdWorkflowVerify(f, nil))
}

// WorkflowPrepareOptions are `pier workflow prepare`'s.
type WorkflowPrepareOptions struct {
	Factory *cmdutil.Factory
	File    string
	Project string
}

// NewCmdWorkflowPrepare is `pier workflow prepare FILE`.
func NewCmdWorkflowPrepare(f *cmdutil.Factory, runF func(*WorkflowPrepareOptions) error) *cobra.Command {
	opts := &WorkflowPrepareOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "prepare <plan.yaml>",
		Short: "Prepare a workflow from a YAML or JSON file and show its plan",
		Long: `Send a workflow (YAML or JSON: projectId and steps) to prepare_workflow and
print the plan a human should read before it is applied: each step, its
price now, which steps cannot be undone and which wait for a human, the
total, and the resource versions the plan read. Preparing holds no budget,
starts nothing and calls no provider. With --json, the envelope as
received, whose data.signedPlan is what pier workflow verify checks.

A step is an operation of the contract (create_quote, upload_assets by
bundleId, launch_service, teardown_service) with the arguments its MCP tool
takes; ${steps.ID.FIELD} takes an earlier step's output. ${NAME} in upper
case is the environment variable NAME.`,
		Example: `  PIER_BUNDLE=bnd_123 DOMAIN=acme.dev pier workflow prepare examples/workflow/site-with-domain.yaml
  pier workflow prepare plan.yaml --project prj_123 --json > prepared.json
  pier workflow apply wfl_123
  pier workflow verify prepared.json`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{cmdutil.OperationAnnotation: "prepare_workflow"},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runWorkflowPrepare(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Project, "project", f.Env("PIER_PROJECT"), "project id, when the file names none (env PIER_PROJECT)")
	return cmd
}

var envRef = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}`)
})

// expandEnv replaces ${NAME} in every string of a parsed document.
func expandEnv(v any, getenv func(string) string) any {
	switch x := v.(type) {
	case string:
		re := envRef()
		return re.ReplaceAllStringFunc(x, func(m string) string { return getenv(re.FindStringSubmatch(m)[1]) })
	case map[string]any:
		for k, e := range x {
			x[k] = expandEnv(e, getenv)
		}
	case []any:
		for i, e := range x {
			x[i] = expandEnv(e, getenv)
		}
	}
	return v
}

// readWorkflow reads a workflow document, YAML or JSON. ${NAME} in upper
// case is the environment variable NAME, as in a compose file; the
// lower-case ${steps.ID.FIELD} references are the server's.
func readWorkflow(path string, getenv func(string) string) (sdk.WorkflowRequest, error) {
	var req sdk.WorkflowRequest
	raw, err := os.ReadFile(path)
	if err != nil {
		return req, err
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return req, fmt.Errorf("%s: not YAML or JSON: %v", path, err)
	}
	var missing []string
	doc = expandEnv(doc, func(name string) string {
		v := getenv(name)
		if v == "" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return req, fmt.Errorf("%s names ${%s}, which is not set in the environment", path, strings.Join(missing, "}, ${"))
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return req, fmt.Errorf("%s: %v", path, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%s: not a workflow (projectId and steps): %v", path, err)
	}
	return req, nil
}

func runWorkflowPrepare(ctx context.Context, o *WorkflowPrepareOptions) error {
	f := o.Factory
	req, err := readWorkflow(o.File, f.Env)
	if err != nil {
		return cmdutil.UsageErrorf("pier workflow prepare", "%v", err)
	}
	if req.ProjectId == "" {
		req.ProjectId = o.Project
	}
	if req.ProjectId == "" {
		if req.ProjectId, err = cmdutil.OnlyProject(ctx, f); err != nil {
			return err
		}
	}
	ctx, cancel := f.Context(ctx)
	defer cancel()
	c, err := f.Client()
	if err != nil {
		return err
	}
	env, err := c.PrepareWorkflow(ctx, &sdk.PrepareWorkflowParams{}, req)
	if err != nil {
		return err
	}
	if f.Config.JSON {
		return cmdutil.PrintJSON(f.IO.Out, env)
	}
	printPlan(f, env.Data)
	fmt.Fprintf(f.IO.Out, "Next: pier workflow apply %s\n", env.Data.WorkflowId)
	return nil
}

func printPlan(f *cmdutil.Factory, w sdk.PreparedWorkflow) {
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tTOOL\tPRICE\tUNDO\tHUMAN\tAFTER")
	for _, s := range w.Steps {
		undo, human := "yes", "-"
		if s.Irreversible {
			undo = "NO"
		}
		if s.NeedsApproval {
			human = "approves"
		}
		after := strings.Join(s.After, ",")
		if after == "" {
			after = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f USD\t%s\t%s\t%s\n", s.Id, s.Tool, s.PriceUsd, undo, human, after)
	}
	tw.Flush()
	fmt.Fprintf(f.IO.Out, "\ntotal     %.2f USD\nworkflow  %s (%s)\ndigest    %s\n", w.TotalUsd, w.WorkflowId, w.State, w.Digest)
	for _, s := range w.Steps {
		if s.ApprovalReason != nil {
			fmt.Fprintf(f.IO.Out, "human     %s: %s\n", s.Id, *s.ApprovalReason)
		}
	}
	if len(w.Versions) > 0 {
		fmt.Fprintln(f.IO.Out, "read")
		for _, v := range w.Versions {
			fmt.Fprintf(f.IO.Out, "  %s %s @ %s\n", v.Type, v.Id, v.Version)
		}
	}
}

// WorkflowVerifyOptions are `pier workflow verify`'s.
type WorkflowVerifyOptions struct {
	Factory *cmdutil.Factory
	File    string
	JWKS    string
}

// NewCmdWorkflowVerify is `pier workflow verify FILE`.
func NewCmdWorkflowVerify(f *cmdutil.Factory, runF func(*WorkflowVerifyOptions) error) *cobra.Command {
	opts := &WorkflowVerifyOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "verify <prepared.json>",
		Short: "Check a prepared workflow against its signed plan and the published keys",
		Long: `Check a prepared workflow offline. Its signed plan's compact JWS must
verify with ES256 under the key its kid names in the JWKS, and its payload
must be the canonical plan whose digest prepare reported. The file is the
output of pier workflow prepare --json or pier workflows get --json (or
its data object, or the bare signed plan).

Everything else in the file is checked against the signed plan, since
the signature covers only the plan: the workflow and project ids, the
digest and key id, totalUsd, each step's id, tool, arguments, order,
price, undo and approval, and the versions read. A member that disagrees,
one the plan does not know, or another signedPlan in the envelope's
actions is refused (exit 1), naming the member. createdAt, state and
taskId are the server's state, which no signature covers: they are listed
as unsigned.

The JWKS comes from --jwks, a file, or else from the server's
/.well-known/workflow-jwks.json. A signature proves the plan is
unchanged; it grants nothing.

Exit 0 when everything agrees, 1 when the signature does not verify or
the file disagrees with its plan, 2 when the file holds no signed plan.`,
		Example: `  pier workflow prepare plan.yaml --json > prepared.json
  pier workflows jwks --json > jwks.json
  pier workflow verify prepared.json --jwks jwks.json
  pier workflow verify prepared.json --jwks jwks.json --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runWorkflowVerify(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.JWKS, "jwks", "", "a JWKS file to verify against, for checking offline")
	return cmd
}

// preparedFile is what pier workflow verify reads: the signed plan and,
// unless the file is the bare plan, the data object beside it and the
// envelope's other members.
type preparedFile struct {
	signed string
	// data is the prepared workflow's data object; nil for a bare plan.
	data json.RawMessage
	// rest holds the envelope's members besides data (its actions).
	rest map[string]json.RawMessage
}

// preparedIn finds the signed plan, its data object and envelope in a
// file.
func preparedIn(raw []byte) (*preparedFile, error) {
	text := strings.TrimSpace(string(raw))
	if strings.Count(text, ".") == 2 && !strings.HasPrefix(text, "{") {
		return &preparedFile{signed: text}, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("not a prepared workflow: %v", err)
	}
	pf := &preparedFile{data: raw}
	if d, ok := top["data"]; ok {
		pf.data = d
		delete(top, "data")
		pf.rest = top
	}
	var data struct {
		SignedPlan string `json:"signedPlan"`
	}
	if err := json.Unmarshal(pf.data, &data); err != nil {
		return nil, fmt.Errorf("not a prepared workflow: %v", err)
	}
	if data.SignedPlan == "" {
		return nil, errors.New("no signedPlan in the file")
	}
	pf.signed = data.SignedPlan
	return pf, nil
}

// otherSignedPlans finds a signedPlan anywhere in v (an envelope's
// actions) that is not signed.
func otherSignedPlans(path string, v any, signed string) string {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "signedPlan" && s != signed {
				return path + "." + k
			}
			if p := otherSignedPlans(path+"."+k, e, signed); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := otherSignedPlans(fmt.Sprintf("%s[%d]", path, i), e, signed); p != "" {
				return p
			}
		}
	}
	return ""
}

// ErrWorkflowMismatch is a prepared workflow whose unsigned members
// disagree with its signed plan: exit 1.
type ErrWorkflowMismatch struct{ File, Reason string }

func (e *ErrWorkflowMismatch) Error() string {
	return fmt.Sprintf("%s: %s. The signature covers only the signed plan: read the plan itself (pier workflow verify --json prints it) or prepare the workflow again", e.File, e.Reason)
}

func runWorkflowVerify(ctx context.Context, o *WorkflowVerifyOptions) error {
	f := o.Factory
	raw, err := os.ReadFile(o.File)
	if err != nil {
		return err
	}
	pf, err := preparedIn(raw)
	if err != nil {
		return cmdutil.UsageErrorf("pier workflow verify", "%s: %v", o.File, err)
	}
	var jwks []byte
	if o.JWKS != "" {
		if jwks, err = os.ReadFile(o.JWKS); err != nil {
			return err
		}
	} else {
		ctx, cancel := f.Context(ctx)
		defer cancel()
		c, err := f.AnonymousClient()
		if err != nil {
			return err
		}
		set, err := c.GetWorkflowJwks(ctx)
		if err != nil {
			return err
		}
		if jwks, err = json.Marshal(set); err != nil {
			return err
		}
	}
	payload, digest, kid, err := workflowplan.Verify(pf.signed, jwks)
	if err != nil {
		return err
	}
	var plan workflowplan.Plan
	if err := json.Unmarshal(payload, &plan); err != nil {
		return err
	}
	checked := "the signed plan"
	unsigned := []string{}
	if pf.data != nil {
		if unsigned, err = workflowplan.CheckProjection(plan, digest, kid, pf.data); err != nil {
			return &ErrWorkflowMismatch{File: o.File, Reason: err.Error()}
		}
		checked = "the signed plan and the prepared workflow beside it"
	}
	if pf.rest != nil {
		for k, v := range pf.rest {
			var doc any
			if json.Unmarshal(v, &doc) != nil {
				continue
			}
			if p := otherSignedPlans(k, doc, pf.signed); p != "" {
				return &ErrWorkflowMismatch{File: o.File, Reason: p + " names another signed plan than data.signedPlan"}
			}
		}
		checked = "the signed plan and the whole envelope"
	}
	if unsigned == nil {
		unsigned = []string{}
	}
	if f.Config.JSON {
		return cmdutil.PrintJSON(f.IO.Out, map[string]any{"valid": true, "digest": digest, "keyId": kid, "checked": checked, "unsigned": unsigned, "plan": plan})
	}
	fmt.Fprintf(f.IO.Out, "valid: workflow %s, %d steps, %.2f USD, signed by %s\ndigest %s\nchecked %s\n", plan.WorkflowID, len(plan.Steps), float64(plan.TotalMicro)/1e6, kid, digest, checked)
	if len(unsigned) > 0 {
		fmt.Fprintf(f.IO.Out, "unsigned %s (the server's state; no signature covers it)\n", strings.Join(unsigned, ", "))
	}
	return nil
}
