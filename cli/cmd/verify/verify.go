package verify

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/verifier"
)

// VerifyOptions are `pier verify-sandbox-proof`'s.
type VerifyOptions struct {
	IO          *cmdutil.IOStreams
	Factory     *cmdutil.Factory
	APIURL      string
	TamperCheck bool
	JSON        bool
	// Proof, when set, checks one minted proof instead of the reference
	// release: a proof id (fetched from the API) or a file holding the
	// proof or the API's answer ("-" for stdin).
	Proof string
}

// ErrProofRejected is a verification that ran and rejected the proof. It
// exits with ExitError (1), as verify-sandbox-proof.mjs does.
type ErrProofRejected struct {
	Check verifier.Check
}

func (e *ErrProofRejected) Error() string {
	return fmt.Sprintf("proof rejected at %s: %s", e.Check.ID, e.Check.Detail)
}

// NewCmdVerifySandboxProof is `pier verify-sandbox-proof`, the auditor's
// check of the published sandbox proof over plain HTTP.
func NewCmdVerifySandboxProof(f *cmdutil.Factory, runF func(*VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{IO: f.IO, Factory: f}
	cmd := &cobra.Command{
		Use:   "verify-sandbox-proof [--base-url URL] [--api-url URL] [--tamper-check] [--proof ID|FILE]",
		Short: "Verify the published sandbox proof as an auditor",
		Long: `Verify the sandbox reference release the way an auditor does, over plain
HTTP and anonymously (SPEC §4 rule 3, docs/sandbox-proof.md §6): download
/.well-known/sandbox-reference.json, require state "available" and a valid
proof id, download every file and compare its SHA-256 with the manifest,
compare GET {api-url}/v1/sandbox/proofs/{proofId} with proof.json, then
check every signature: the proof against the proof JWKS, the mandate
against its holder key with the issuer's kid as audience, each receipt
against the issuer JWKS, each gate decision against the mandate's holder
key and its gate. ES256 only; keys are picked by kid.

The first failure stops the run. --tamper-check also alters the artifact in
memory and requires that it is rejected. The exit code is 0 when the proof
is accepted, 1 on any mismatch, 2 on a usage error. --json prints the
report: {verdict, proofId, checks: [{id, ok, detail}]}.

--proof checks one proof a session minted instead of the reference
release: a proof id (fetched from {api-url}/v1/sandbox/proofs/ID) or a file
holding the proof or that answer (- for stdin). Its signatures are checked
with the keys the server publishes; provenance and the coverage of both
scenarios belong to the reference release and are not asked of it.`,
		Example: `  pier verify-sandbox-proof --base-url http://localhost:8080 --tamper-check
  pier verify-sandbox-proof --proof sbp_AbCdEfGhIjKlMnOpQrStUv
  pier sandbox proofs get sbp_AbCdEfGhIjKlMnOpQrStUv --json > proof.json && pier verify-sandbox-proof --proof proof.json
  pier verify-sandbox-proof --base-url https://pier.example --api-url https://api.pier.example --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.Config.JSON
			if runF != nil {
				return runF(opts)
			}
			return verifySandboxProof(cmd, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.APIURL, "api-url", "", "host that serves GET /v1/sandbox/proofs/{proofId} (default: the base URL)")
	fl.BoolVar(&opts.TamperCheck, "tamper-check", false, "also alter the artifact in memory and require that it is rejected")
	fl.StringVar(&opts.Proof, "proof", "", "check this minted proof instead of the reference release: a proof `id` (sbp_…) or a file (- for stdin)")
	return cmd
}

func verifySandboxProof(cmd *cobra.Command, o *VerifyOptions) error {
	ctx, cancel := o.Factory.Context(cmd.Context())
	defer cancel()
	var rep *verifier.Report
	var err error
	if o.Proof != "" {
		po := verifier.ProofOptions{BaseURL: o.Factory.BaseURL(), APIURL: o.APIURL, TamperCheck: o.TamperCheck, HTTPClient: o.Factory.HTTPClient}
		if _, statErr := os.Stat(o.Proof); statErr == nil || o.Proof == "-" {
			arg := "@" + o.Proof
			if o.Proof == "-" {
				arg = "-"
			}
			if po.Proof, err = cmdutil.ReadDataArg(arg, o.IO); err != nil {
				return &cmdutil.UsageError{Err: fmt.Errorf("--proof: %v", err), Command: cmd.CommandPath()}
			}
		} else {
			po.ProofID = o.Proof
		}
		rep, err = verifier.VerifyProof(ctx, po)
	} else {
		rep, err = verifier.Verify(ctx, verifier.Options{
			BaseURL: o.Factory.BaseURL(), APIURL: o.APIURL, TamperCheck: o.TamperCheck, HTTPClient: o.Factory.HTTPClient,
		})
	}
	if err != nil {
		return &cmdutil.UsageError{Err: err, Command: cmd.CommandPath()}
	}
	if o.JSON {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := cmdutil.WriteRaw(o.IO.Out, b); err != nil {
			return err
		}
	} else {
		st := cmdutil.NewStyles(o.Factory, o.IO.StdoutIsTerminal)
		var b strings.Builder
		width := 0
		for _, c := range rep.Checks {
			width = max(width, len(c.ID))
		}
		for _, c := range rep.Checks {
			mark := st.Key.Render("ok  ")
			if !c.OK {
				mark = st.Err.Render("FAIL")
			}
			fmt.Fprintf(&b, "%s  %-*s  %s\n", mark, width, c.ID, st.Faint.Render(c.Detail))
		}
		verdict := string(rep.Verdict)
		if rep.ProofID != "" {
			verdict += " (" + rep.ProofID + ")"
		}
		fmt.Fprintf(&b, "%s %s\n", st.Bold.Render("verdict:"), verdict)
		if _, err := fmt.Fprint(o.IO.Out, b.String()); err != nil {
			return err
		}
	}
	if failed := rep.Failed(); failed != nil {
		return &ErrProofRejected{Check: *failed}
	}
	return nil
}
