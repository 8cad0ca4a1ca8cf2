package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/conformance"
	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/sdk"
)

// ErrConformanceFailed is a run whose outcome is fail, or a verification
// that refused a report: both exit ExitError (1) after the output.
type ErrConformanceFailed struct {
	Code, Message string
}

func (e *ErrConformanceFailed) Error() string { return e.Code + ": " + e.Message }

// NewCmdConformance is `pier conformance`, the public probes and the
// auditor's check of their reports.
func NewCmdConformance(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run the public conformance probes and verify their signed reports",
		Long: `Run Pier's public probes against a deployment and write a signed run
report (SPEC §2.11), or verify reports and their chain with no server.

  run     runs the wire, discovery and governed suites and writes the report
  verify  checks a report's schema, signature, signer and summary, and a
          chain up to the head you anchor it with
  jwks    prints the public key reports are signed with, for auditors`,
		Example: `  pier conformance run --base-url http://localhost:8080 --profile anonymous --out report.json
  PIER_API_KEY=pk_… pier conformance run --profile governed --previous report.json --out next.json
  pier conformance jwks > trusted-jwks.json
  pier conformance verify next.json --keys trusted-jwks.json
  pier conformance verify --chain reports/ --keys trusted-jwks.json --head DIGEST`,
	}
	cmd.AddCommand(NewCmdConformanceRun(f, nil), NewCmdConformanceVerify(f, nil), NewCmdConformanceJWKS(f, nil))
	return cmd
}

// ConformanceRunOptions are `pier conformance run`'s.
type ConformanceRunOptions struct {
	IO       *cmdutil.IOStreams
	Factory  *cmdutil.Factory
	Profile  string
	Previous string
	Out      string
	Key      string
	Project  string
	JSON     bool
}

// NewCmdConformanceRun is `pier conformance run`.
func NewCmdConformanceRun(f *cmdutil.Factory, runF func(*ConformanceRunOptions) error) *cobra.Command {
	opts := &ConformanceRunOptions{IO: f.IO, Factory: f}
	cmd := &cobra.Command{
		Use:   "run --profile anonymous|governed [--previous REPORT] [--out FILE] [--key FILE]",
		Short: "Run the three probe suites against a deployment and write a signed report",
		Long: `Run the wire, discovery and governed suites against --base-url (or
PIER_BASE_URL) and write a v2 run report.

  wire       envelopes, errors and typed actions, the MCP transport rules
             (406, no session, protocol 2025-03-26, Origin), the 429 shape
             and idempotent replays
  discovery  /healthz, /openapi.json, the published schemas, OAuth metadata,
             the sandbox reference manifest and its hashes, the verifier and
             holder scripts, MCP tools/list
  governed   with an API key (PIER_API_KEY or --api-key), only in the
             governed profile: a quote and its 15-minute hold, a launch and
             its teardown, a human gate, holder endpoints refusing agent
             authority, and the sandbox mandate flow as a simulated holder;
             under anonymous it is not_run and not required. Each governed
             probe records its holder (none or simulated) at the end of its
             spec: a simulated holder never supports the human-separation
             claim (SPEC §5). They run in a throwaway project: the run
             creates conformance-<timestamp> as a child of --project
             (default the key's first project), carving up to 25 USD out
             of its remaining budget (create_project, so the key needs
             the launch scope), and deletes it at the end, also when a
             probe fails or the run is interrupted (delete_project: the
             probe's service is torn down, its budget raise canceled and
             the unspent budget given back). Stderr names the project it
             created and removed, even under --json; if removing it
             failed, what is left in it and the command that removes it

The report records the target's spec and schema digests, links to
--previous through previousDigest, and is signed by a detached ES256 JWS
over its digest, written to FILE.jws beside --out. The key is --key, or
conformance.jwk in Pier's config directory, created (mode 0600) on first
use. Under GitHub Actions the runner block reads hosted-actions and the
run's coordinates; elsewhere, local.

Without --json, stdout shows a table of suites and probes, coloured when
stdout is a terminal (NO_COLOR or CLICOLOR=0 turns colour off,
CLICOLOR_FORCE on). Without --out the report goes to stdout with --json
and nowhere otherwise.
Exit 0 when every required suite passes, 1 when one fails.`,
		Example: `  pier conformance run --base-url http://localhost:8080 --profile anonymous --out anon.json
  pier conformance run --profile governed --previous anon.json --out governed.json --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.Config.JSON
			if opts.Profile != conformance.ProfileAnonymous && opts.Profile != conformance.ProfileGoverned {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--profile must be anonymous or governed")
			}
			if opts.Profile == conformance.ProfileGoverned && f.APIKey() == "" {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "the governed profile needs an API key: set PIER_API_KEY or pass --api-key")
			}
			if runF != nil {
				return runF(opts)
			}
			return conformanceRun(cmd, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Profile, "profile", "", "anonymous or governed")
	fl.StringVar(&opts.Previous, "previous", "", "the previous report `file`, to chain to")
	fl.StringVar(&opts.Out, "out", "", "write the report to `file` and its signature to file.jws")
	fl.StringVar(&opts.Key, "key", "", "signing key `file` (a P-256 private JWK; default conformance.jwk in the config directory)")
	fl.StringVar(&opts.Project, "project", f.Env("PIER_PROJECT"), "project the governed suite's throwaway project is carved from (env PIER_PROJECT; default: the key's first)")
	return cmd
}

// conformanceKey loads the signing key, creating the default one on
// first use.
func conformanceKey(path string) (*holder.Key, string, error) {
	if path != "" {
		k, err := holder.LoadKey(path)
		return k, path, err
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return nil, "", err
	}
	path = filepath.Join(dir, "pier", "conformance.jwk")
	if k, err := holder.LoadKey(path); err == nil {
		return k, path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, path, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, path, err
	}
	k, err := holder.GenerateKey()
	if err != nil {
		return nil, path, err
	}
	return k, path, holder.SaveKey(path, k)
}

func conformanceRun(cmd *cobra.Command, o *ConformanceRunOptions) error {
	f := o.Factory
	key, keyPath, err := conformanceKey(o.Key)
	if err != nil {
		return fmt.Errorf("signing key %s: %w", keyPath, err)
	}
	prev, err := previousDigest(cmd, o.Previous)
	if err != nil {
		return err
	}
	hc := f.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	errSt := cmdutil.NewStyles(f, o.IO.StderrIsTerminal)
	progress := func(suite string, p sdk.ConformanceProbe) {
		if o.JSON || !cmdutil.IsTerminal(o.IO.StderrIsTerminal) {
			return
		}
		fmt.Fprintf(o.IO.ErrOut, "%s %s\n", errSt.Faint.Render(string(p.Status)), p.Id)
	}
	rep, err := conformance.Run(cmd.Context(), conformance.Options{
		BaseURL: f.BaseURL(), Profile: o.Profile, APIKey: f.APIKey(), ProjectID: o.Project,
		PreviousDigest: prev, HTTPClient: hc, Getenv: f.Env, Progress: progress,
		// What the run does to the organisation is said even under
		// --json, on stderr.
		Say: func(what string) { fmt.Fprintln(o.IO.ErrOut, what) },
	})
	if err != nil {
		return &cmdutil.UsageError{Err: err, Command: cmd.CommandPath()}
	}
	return writeSignedReport(o, key, keyPath, rep)
}

// previousDigest reads the report --previous names and gives its digest,
// which the new report chains to.
func previousDigest(cmd *cobra.Command, path string) (*string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &cmdutil.UsageError{Err: err, Command: cmd.CommandPath()}
	}
	d, err := conformance.Digest(b)
	if err != nil {
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("--previous: %w", err), Command: cmd.CommandPath()}
	}
	return &d, nil
}

// writeSignedReport signs the report, writes it and its signature where
// --out says, and prints it; a failed run exits with its code.
func writeSignedReport(o *ConformanceRunOptions, key *holder.Key, keyPath string, rep *conformance.Report) error {
	f := o.Factory
	raw, err := conformance.Marshal(rep)
	if err != nil {
		return err
	}
	digest, err := conformance.Digest(raw)
	if err != nil {
		return err
	}
	sig, err := conformance.Sign(key, digest)
	if err != nil {
		return err
	}
	if o.Out != "" {
		if err := writeFileAtomic(o.Out, raw, 0o644); err != nil {
			return err
		}
		if err := writeFileAtomic(conformance.SignaturePath(o.Out), []byte(sig+"\n"), 0o644); err != nil {
			return err
		}
	}
	if o.JSON {
		if err := cmdutil.WriteRaw(o.IO.Out, raw); err != nil {
			return err
		}
	} else {
		// stdout's own styles: colour there follows stdout, not stderr.
		out := cmdutil.NewStyles(f, o.IO.StdoutIsTerminal)
		renderConformance(o.IO, out, rep)
		fmt.Fprintf(o.IO.Out, "%s %s\n", out.Bold.Render("digest:"), digest)
		fmt.Fprintf(o.IO.Out, "%s %s (%s)\n", out.Bold.Render("signed by:"), key.Thumbprint(), keyPath)
		if o.Out != "" {
			fmt.Fprintf(o.IO.Out, "%s %s, %s\n", out.Bold.Render("written:"), o.Out, conformance.SignaturePath(o.Out))
			jwks := "pier conformance jwks"
			if o.Key != "" {
				jwks += " --key " + o.Key
			}
			fmt.Fprintf(o.IO.Out, "Next: pier conformance verify %s --keys conformance-jwks.json  (after %s > conformance-jwks.json)\n", o.Out, jwks)
		}
	}
	if rep.Summary.Outcome != conformance.Pass {
		return &ErrConformanceFailed{Code: "conformance:run_failed", Message: fmt.Sprintf("%d probe(s) failed", rep.Summary.Failed)}
	}
	return nil
}

func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func renderConformance(io *cmdutil.IOStreams, st cmdutil.Styles, rep *conformance.Report) {
	var b strings.Builder
	width := 0
	for _, s := range rep.Suites {
		for _, p := range s.Probes {
			width = max(width, len(p.Id))
		}
	}
	mark := func(status string) string {
		switch status {
		case conformance.Pass:
			return st.Key.Render("pass   ")
		case conformance.Fail:
			return st.Err.Render("FAIL   ")
		case conformance.Skip:
			return st.Faint.Render("skip   ")
		}
		return st.Faint.Render("not_run")
	}
	for _, s := range rep.Suites {
		req := "required"
		if !s.Required {
			req = "not required"
		}
		fmt.Fprintf(&b, "%s  %s %s\n", st.Header.Render(string(s.Id)), mark(string(s.Outcome)), st.Faint.Render("("+req+")"))
		for _, p := range s.Probes {
			detail := ""
			if p.HttpStatus != nil {
				detail = fmt.Sprintf("%d", *p.HttpStatus)
			}
			if p.LatencyMs != nil {
				detail += fmt.Sprintf(" %dms", *p.LatencyMs)
			}
			if h := conformance.ProbeHolder(p); h != "" && h != conformance.HolderNone {
				detail += " holder: " + h
			}
			fmt.Fprintf(&b, "  %s  %-*s  %s\n", mark(string(p.Status)), width, p.Id, st.Faint.Render(strings.TrimSpace(detail)))
			if p.Error != nil {
				fmt.Fprintf(&b, "           %s\n", *p.Error)
			}
		}
	}
	s := rep.Summary
	outcome := st.Key.Render(string(s.Outcome))
	if s.Outcome != conformance.Pass {
		outcome = st.Err.Render("FAIL")
	}
	fmt.Fprintf(&b, "%s %s: %d passed, %d failed, %d skipped\n", st.Bold.Render("outcome:"), outcome, s.Passed, s.Failed, s.Skipped)
	fmt.Fprint(io.Out, b.String())
}

// ConformanceVerifyOptions are `pier conformance verify`'s.
type ConformanceVerifyOptions struct {
	IO      *cmdutil.IOStreams
	Factory *cmdutil.Factory
	Reports []string
	Chain   string
	// KeySet is a JWKS file or the https URL it is published at.
	KeySet string
	// Head and Count anchor the chain's newest end.
	Head  string
	Count int
	JSON  bool
}

// digestRE is compiled on first use: a counted repetition costs about 170
// allocations, which every pier command would pay at start otherwise
// (bench/README.md, "CLI start").
var digestRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-f0-9]{64}$`) })

// NewCmdConformanceVerify is `pier conformance verify`.
func NewCmdConformanceVerify(f *cmdutil.Factory, runF func(*ConformanceVerifyOptions) error) *cobra.Command {
	opts := &ConformanceVerifyOptions{IO: f.IO, Factory: f}
	cmd := &cobra.Command{
		Use:   "verify [REPORT...] [--chain DIR (--head DIGEST | --count N)] --keys JWKS",
		Short: "Verify run reports: schema, signature, signer, summary and chain, with no server",
		Long: `Verify conformance run reports as an auditor, offline.

For each REPORT (and each *.json in --chain DIR), with its detached
signature REPORT.jws beside it:
  - the schema: v1 or v2 as its schemaVersion says, no extra members;
  - the signature: ES256 only, over the SHA-256 of the report's RFC 8785
    canonical form, by the key its kid names;
  - the signer: that key must be in --keys, a JWKS you trust: a file, or
    the https URL where the signer publishes it (pier conformance jwks
    prints one). A key the signature carries itself proves nothing about
    who signed: without --keys the signer's thumbprint is printed as
    unverified and verify exits 1 (conformance:signer_untrusted);
  - the summary and each suite's outcome against the probes;
  - the holder each governed probe records (none or simulated): a
    simulated holder never supports the human-separation claim (SPEC §5).
With --chain, the reports ordered by startedAt must form one chain: the
first with a null previousDigest, each next naming the digest of the one
before. A missing report is conformance:chain_gap; one out of place is
conformance:chain_order. The chain's newest end is anchored by what you
know from outside it: --head DIGEST, the newest report's digest (pier
conformance run prints it), or --count N reports. A chain not ending there
is conformance:chain_head; one with neither is conformance:chain_unanchored.

Exit 0 when everything verifies, 1 with a typed reason otherwise
(conformance:schema_invalid, conformance:signature_invalid,
conformance:signer_untrusted, conformance:summary_mismatch,
conformance:chain_gap, conformance:chain_order, conformance:chain_head,
conformance:chain_unanchored, conformance:unreadable), 2 on a usage
error. --json prints {verified: bool, signer: {kid, trusted}, reports: [...],
error: {code, message, file}}.`,
		Example: `  pier conformance jwks --key conformance.jwk > trusted-jwks.json   # the signer, once
  pier conformance verify report.json --keys trusted-jwks.json
  pier conformance verify --chain reports/ --keys https://example.org/conformance-jwks.json --head 3f9a…e1
  pier conformance verify --chain reports/ --keys trusted-jwks.json --count 12 --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.Config.JSON
			opts.Reports = args
			if len(args) == 0 && opts.Chain == "" {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "give a REPORT file, or --chain DIR")
			}
			if (opts.Head != "" || opts.Count != 0) && opts.Chain == "" {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--head and --count anchor a chain: use them with --chain DIR")
			}
			if opts.Head != "" && !digestRE().MatchString(opts.Head) {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--head must be a report digest, 64 lowercase hex characters")
			}
			if opts.Count < 0 {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--count must be at least 1")
			}
			if runF != nil {
				return runF(opts)
			}
			return conformanceVerify(cmd, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Chain, "chain", "", "verify every report in `dir` and that they form one chain")
	fl.StringVar(&opts.KeySet, "keys", "", "the trusted signing keys: a JWKS `file`, or the https URL it is published at; keys are picked by kid")
	fl.StringVar(&opts.Head, "head", "", "with --chain: the `digest` of the newest report, which the chain must end with")
	fl.IntVar(&opts.Count, "count", 0, "with --chain: the number of reports the chain must hold")
	return cmd
}

func conformanceVerify(cmd *cobra.Command, o *ConformanceVerifyOptions) error {
	var trusted *conformance.KeySet
	if o.KeySet != "" {
		hc := o.Factory.HTTPClient
		if hc == nil {
			hc = &http.Client{Timeout: 30 * time.Second}
		}
		var err error
		if trusted, err = conformance.ReadKeySet(cmd.Context(), hc, o.KeySet); err != nil {
			return &cmdutil.UsageError{Err: fmt.Errorf("--keys: %w", err), Command: cmd.CommandPath()}
		}
	}
	var verified []*conformance.Verified
	var failure error
	for _, p := range o.Reports {
		v, err := conformance.VerifyFile(p, trusted)
		if err != nil {
			failure = err
			break
		}
		verified = append(verified, v)
	}
	if failure == nil && o.Chain != "" {
		chain, err := conformance.VerifyChain(o.Chain, trusted)
		if err != nil {
			failure = err
		} else {
			failure = conformance.Anchor{Head: o.Head, Count: o.Count}.Check(chain)
		}
		verified = append(verified, chain...)
	}
	// Only once everything else holds: a report refused for its content
	// says so, whoever signed it.
	if failure == nil {
		failure = conformance.RequireTrusted(verified)
	}
	var typed *conformance.Error
	if failure != nil && !errors.As(failure, &typed) {
		typed = &conformance.Error{Code: conformance.CodeUnreadable, Message: failure.Error()}
	}
	if o.JSON {
		out := map[string]any{"verified": failure == nil, "reports": verified}
		if s := oneSigner(verified); s != nil {
			out["signer"] = s
		}
		if typed != nil {
			out["error"] = typed
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		if err := cmdutil.WriteRaw(o.IO.Out, b); err != nil {
			return err
		}
	} else {
		st := cmdutil.NewStyles(o.Factory, o.IO.StdoutIsTerminal)
		mark := st.Key.Render("ok")
		if failure != nil {
			mark = st.Err.Render("unverified")
		}
		for _, v := range verified {
			signer := v.Signer.KID + " (trusted: in --keys)"
			if !v.Signer.Trusted {
				signer = v.Signer.KID + " " + st.Err.Render("(unverified: the signature's own jwk; no key you trust)")
			}
			fmt.Fprintf(o.IO.Out, "%s  %s  %s %s %s\n      digest %s\n      signed by %s\n", mark, v.File, v.SchemaVersion, v.Profile, v.Outcome, v.Digest, signer)
			if v.Profile == conformance.ProfileGoverned {
				fmt.Fprintf(o.IO.Out, "      human separation: %s\n", humanSeparationLine(v))
			}
		}
		if o.Chain != "" && failure == nil {
			fmt.Fprintf(o.IO.Out, "%s %s: %d reports in one chain, ending at the anchor you gave\n", st.Bold.Render("chain:"), o.Chain, len(verified)-len(o.Reports))
		}
	}
	if typed != nil {
		msg := typed.Message
		if typed.File != "" {
			msg = typed.File + ": " + msg
		}
		return &ErrConformanceFailed{Code: typed.Code, Message: msg}
	}
	return nil
}

// oneSigner is the signer of every report, when they share one.
func oneSigner(vs []*conformance.Verified) *conformance.Signer {
	if len(vs) == 0 {
		return nil
	}
	s := vs[0].Signer
	for _, v := range vs[1:] {
		if v.Signer != s {
			return nil
		}
	}
	return &s
}

// humanSeparationLine says whether a governed report supports the
// human-separation claim, and why not.
func humanSeparationLine(v *conformance.Verified) string {
	if v.HumanSeparation {
		return "shown (a governed probe passed with a human holder)"
	}
	var simulated []string
	for id, h := range v.Holders {
		if h == conformance.HolderSimulated {
			simulated = append(simulated, id)
		}
	}
	if len(simulated) == 0 {
		return "not shown (no governed probe records a human holder)"
	}
	sort.Strings(simulated)
	return "not shown (" + strings.Join(simulated, ", ") + " used a simulated holder, which cannot satisfy it: SPEC §5)"
}

// ConformanceJWKSOptions are `pier conformance jwks`'s.
type ConformanceJWKSOptions struct {
	IO  *cmdutil.IOStreams
	Key string
}

// NewCmdConformanceJWKS is `pier conformance jwks`.
func NewCmdConformanceJWKS(f *cmdutil.Factory, runF func(*ConformanceJWKSOptions) error) *cobra.Command {
	opts := &ConformanceJWKSOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "jwks [--key FILE]",
		Short: "Print the public JWKS of the key that signs run reports",
		Long: `Print, as a JWKS, the public half of the key pier conformance run signs
with: --key FILE, or conformance.jwk in Pier's config directory. Hand it
to auditors, or publish it at an https URL they name, for pier conformance
verify --keys. The private key never leaves its file. A key that does not
exist yet is not created: run pier conformance run (or pier holder keygen
--key FILE) first.`,
		Example: `  pier conformance jwks > trusted-jwks.json
  pier conformance jwks --key chain/key/conformance.jwk > trusted-jwks.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			path := opts.Key
			if path == "" {
				dir, err := os.UserConfigDir()
				if err != nil {
					return err
				}
				path = filepath.Join(dir, "pier", "conformance.jwk")
			}
			k, err := holder.LoadKey(path)
			if errors.Is(err, os.ErrNotExist) {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "no signing key at %s: run pier conformance run first, or pass --key FILE", path)
			}
			if err != nil {
				return fmt.Errorf("signing key %s: %w", path, err)
			}
			b, _ := json.MarshalIndent(conformance.PublicKeySet(k), "", "  ")
			return cmdutil.WriteRaw(opts.IO.Out, b)
		},
	}
	cmd.Flags().StringVar(&opts.Key, "key", "", "signing key `file` (default conformance.jwk in the config directory)")
	return cmd
}
