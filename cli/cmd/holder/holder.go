package holder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/sdk"
)

// NewCmdHolder is `pier holder`: the sandbox holder's key, mandate and gate
// decisions, over the holder library. It never sends agent authority: no
// API key, no Authorization header.
func NewCmdHolder(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "holder <command>",
		Short: "Act as the sandbox holder: a P-256 key, the mandate and gate decisions",
		Long: `Act as the sandbox holder, who signs with a P-256 key and never with agent
authority: these commands send no API key and no Authorization header.

  keygen   writes a new holder key file (mode 0600)
  mandate  fetches the published issuer key, signs the 100 USD fake-money
           open mandate for a session and registers it
  decide   signs a gate's requestDigest, nonce, outcome and expiry and posts
           the decision

Run headless they are a simulated holder, as in CI: they prove control of
the key, not that a person reviewed anything (SPEC §5).`,
		Example: `  pier holder keygen --key holder.jwk
  pier holder mandate --session sbs_… --key holder.jwk
  pier sandbox attempts create sbs_… --scenario approval --api-key "$CAPABILITY" --json > attempt.json
  pier holder decide --key holder.jwk --gate-file attempt.json`,
	}
	cmd.AddCommand(NewCmdHolderKeygen(f, nil), NewCmdHolderMandate(f, nil), NewCmdHolderDecide(f, nil))
	return cmd
}

// HolderKeygenOptions are `pier holder keygen`'s.
type HolderKeygenOptions struct {
	IO   *cmdutil.IOStreams
	Key  string
	JSON bool
}

// NewCmdHolderKeygen is `pier holder keygen`.
func NewCmdHolderKeygen(f *cmdutil.Factory, runF func(*HolderKeygenOptions) error) *cobra.Command {
	opts := &HolderKeygenOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "keygen --key FILE",
		Short: "Write a new holder key to a file of mode 0600",
		Long: `Write a new P-256 holder key, as a private JWK, to a new file of mode
0600. An existing file is never replaced: losing a holder key loses control
of its mandates. The file is the one sandbox-holder.mjs reads too.`,
		Example: `  pier holder keygen --key holder.jwk`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.Config.JSON
			if opts.Key == "" {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--key is required")
			}
			if runF != nil {
				return runF(opts)
			}
			return holderKeygen(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Key, "key", "", "holder key `file` to create")
	return cmd
}

func holderKeygen(o *HolderKeygenOptions) error {
	k, err := holder.GenerateKey()
	if err != nil {
		return err
	}
	if err := holder.SaveKey(o.Key, k); err != nil {
		return err
	}
	return holderOutput(o.IO, o.JSON, map[string]any{"key": o.Key, "thumbprint": k.Thumbprint()},
		fmt.Sprintf("wrote %s\nholder key thumbprint %s", o.Key, k.Thumbprint()))
}

// HolderCall is what a signed holder request takes, a mandate or a gate
// decision: the key that signs it, the session it is for, and whether to
// keep it back (--no-post) and print JSON.
type HolderCall struct {
	IO      *cmdutil.IOStreams
	Factory *cmdutil.Factory
	Key     string
	Session string
	NoPost  bool
	JSON    bool
}

// printUnposted prints a signed request that --no-post keeps back. The JWS
// is what goes on, so it is stdout (out with --json); a person reads it
// decoded on stderr.
func (o *HolderCall) printUnposted(jws string, out map[string]any) error {
	if !o.JSON {
		cmdutil.WriteRaw(o.IO.ErrOut, []byte(decodedCompact(jws)))
	}
	return holderOutput(o.IO, o.JSON, out, jws)
}

// HolderMandateOptions are `pier holder mandate`'s.
type HolderMandateOptions struct {
	HolderCall
	// Registration is the session's registration secret, handed over by
	// whoever created the session.
	Registration string
	IssuerKID    string
}

// NewCmdHolderMandate is `pier holder mandate`.
func NewCmdHolderMandate(f *cmdutil.Factory, runF func(*HolderMandateOptions) error) *cobra.Command {
	opts := &HolderMandateOptions{HolderCall: HolderCall{IO: f.IO, Factory: f}}
	cmd := &cobra.Command{
		Use:   "mandate --session ID --registration-secret SECRET --key FILE",
		Short: "Sign the 100 USD fake-money mandate for a session and register it",
		Long: `Fetch the issuer key published at /reference/sandbox/issuer-jwks.json,
sign an open mandate for 100 fake USD naming it as the audience, and
register it at POST /v1/sandbox/sessions/{id}/mandate with the session id
and the registration secret that whoever created the session handed you
(the registrationSecret of create_sandbox_session's answer; also read from
PIER_SANDBOX_REGISTRATION_SECRET). Knowing a session id is not enough to
become its holder. --no-post prints the signed mandate without registering
it. A retry sends the same Idempotency-Key (the mandate's digest) and gets
the stored answer.`,
		Example: `  pier holder mandate --session sbs_… --registration-secret sbr_… --key holder.jwk
  pier holder mandate --session sbs_… --key holder.jwk --issuer-kid KID --no-post`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.Config.JSON
			if opts.Key == "" || opts.Session == "" {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--key and --session are required")
			}
			if opts.Registration == "" {
				opts.Registration = strings.TrimSpace(f.Env("PIER_SANDBOX_REGISTRATION_SECRET"))
			}
			if opts.Registration == "" && !opts.NoPost {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--registration-secret is required: ask whoever created the session for the registrationSecret it was given")
			}
			if runF != nil {
				return runF(opts)
			}
			return holderMandate(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Key, "key", "", "holder key `file`")
	fl.StringVar(&opts.Session, "session", "", "sandbox session `id`")
	fl.StringVar(&opts.Registration, "registration-secret", "", "the session's registration `secret` (PIER_SANDBOX_REGISTRATION_SECRET)")
	fl.StringVar(&opts.IssuerKID, "issuer-kid", "", "issuer key id to name; default: the first key of the published issuer JWKS")
	fl.BoolVar(&opts.NoPost, "no-post", false, "print the signed mandate without registering it")
	return cmd
}

func holderMandate(ctx context.Context, o *HolderMandateOptions) error {
	k, err := holder.LoadKey(o.Key)
	if err != nil {
		return err
	}
	ctx, cancel := o.Factory.Context(ctx)
	defer cancel()
	c := holderClient(o.Factory)
	base := o.Factory.BaseURL()
	kid := o.IssuerKID
	if kid == "" {
		issuer, err := c.FetchIssuerKey(ctx, base)
		if err != nil {
			return holderError(err)
		}
		kid = issuer.KID
	}
	m, err := holder.NewMandate(o.Session, kid, time.Now())
	if err != nil {
		return err
	}
	jws, err := holder.SignMandate(k, m)
	if err != nil {
		return err
	}
	out := map[string]any{"mandate": jws, "thumbprint": k.Thumbprint(), "issuerKid": kid}
	if o.NoPost {
		return o.printUnposted(jws, out)
	}
	resp, err := c.RegisterMandate(ctx, base, o.Session, o.Registration, jws)
	if err != nil {
		return holderError(err)
	}
	out["response"] = json.RawMessage(resp.Body)
	return holderOutput(o.IO, o.JSON, out, fmt.Sprintf("mandate registered for session %s\n%s", o.Session, decodedCompact(jws)))
}

// HolderDecideOptions are `pier holder decide`'s.
type HolderDecideOptions struct {
	HolderCall
	Gate     string
	GateFile string
	Deny     bool
}

// NewCmdHolderDecide is `pier holder decide`.
func NewCmdHolderDecide(f *cmdutil.Factory, runF func(*HolderDecideOptions) error) *cobra.Command {
	opts := &HolderDecideOptions{HolderCall: HolderCall{IO: f.IO, Factory: f}}
	cmd := &cobra.Command{
		Use:   "decide --key FILE (--gate JSON | --gate-file FILE)",
		Short: "Sign a gate decision and post it",
		Long: `Sign the gate's requestDigest, nonce, outcome and expiry, with the session
and gate ids, and post the decision to
POST /v1/sandbox/sessions/{id}/gates/{gateId}/decision without agent
authority. The first valid decision on a gate wins.

--gate and --gate-file take the gate, {"gate": …}, or the whole attempt
response that carries it as data.gate; "-" reads standard input. The
session id comes from --session, or from the attempt response's
data.sessionId. --deny signs a denial instead of an approval; --no-post
prints the signed decision without posting it.`,
		Example: `  pier holder decide --key holder.jwk --gate-file attempt.json
  pier holder decide --session sbs_… --key holder.jwk --gate '{"id":"sbg_…",…}' --deny`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.Config.JSON
			if opts.Key == "" {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--key is required")
			}
			if (opts.Gate == "") == (opts.GateFile == "") {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "give exactly one of --gate and --gate-file")
			}
			if runF != nil {
				return runF(opts)
			}
			return holderDecide(cmd.Context(), cmd.CommandPath(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Key, "key", "", "holder key `file`")
	fl.StringVar(&opts.Session, "session", "", "sandbox session `id` (default: data.sessionId of the attempt response)")
	fl.StringVar(&opts.Gate, "gate", "", "the gate as `json`, or an attempt response carrying it")
	fl.StringVar(&opts.GateFile, "gate-file", "", "read the gate from `file` (- for stdin)")
	fl.BoolVar(&opts.Deny, "deny", false, "sign a denial instead of an approval")
	fl.BoolVar(&opts.NoPost, "no-post", false, "print the signed decision without posting it")
	return cmd
}

func holderDecide(ctx context.Context, path string, o *HolderDecideOptions) error {
	raw := []byte(o.Gate)
	if o.GateFile != "" {
		var err error
		if o.GateFile == "-" {
			raw, err = io.ReadAll(io.LimitReader(o.IO.In, 1<<20))
		} else {
			raw, err = os.ReadFile(o.GateFile)
		}
		if err != nil {
			return &cmdutil.UsageError{Err: err, Command: path}
		}
	}
	gate, session, err := readGate(raw)
	if err != nil {
		return &cmdutil.UsageError{Err: err, Command: path}
	}
	if o.Session != "" {
		session = o.Session
	}
	if session == "" {
		return cmdutil.UsageErrorf(path, "--session is required when the gate does not come in an attempt response")
	}
	k, err := holder.LoadKey(o.Key)
	if err != nil {
		return err
	}
	outcome := holder.Approve
	if o.Deny {
		outcome = holder.Deny
	}
	jws, err := holder.SignDecision(k, session, gate, outcome)
	if err != nil {
		return err
	}
	out := map[string]any{"decision": jws, "gateId": gate.ID, "outcome": outcome, "thumbprint": k.Thumbprint()}
	if o.NoPost {
		return o.printUnposted(jws, out)
	}
	ctx, cancel := o.Factory.Context(ctx)
	defer cancel()
	resp, err := holderClient(o.Factory).PostDecision(ctx, o.Factory.BaseURL(), session, gate.ID, jws)
	if err != nil {
		return holderError(err)
	}
	out["response"] = json.RawMessage(resp.Body)
	text := fmt.Sprintf("gate %s %s\n%s", gate.ID, outcome, decodedCompact(jws))
	var d struct {
		ProofID *string `json:"proofId"`
	}
	if json.Unmarshal(resp.Data, &d) == nil && d.ProofID != nil {
		text += "\nproof " + *d.ProofID
	}
	return holderOutput(o.IO, o.JSON, out, text)
}

// readGate accepts the gate, {"gate": …} or an attempt response
// ({"data": {"gate": …, "sessionId": …}}), so a holder can pass on whatever
// the agent handed over.
func readGate(raw []byte) (holder.Gate, string, error) {
	var doc struct {
		holder.Gate
		Inner *holder.Gate `json:"gate"`
		Data  *struct {
			Gate      *holder.Gate `json:"gate"`
			SessionID string       `json:"sessionId"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return holder.Gate{}, "", fmt.Errorf("the gate is not JSON: %v", err)
	}
	g, session := doc.Gate, ""
	switch {
	case doc.Data != nil && doc.Data.Gate != nil:
		g, session = *doc.Data.Gate, doc.Data.SessionID
	case doc.Data != nil:
		return holder.Gate{}, "", errors.New("the attempt response carries no gate: only approval attempts open one")
	case doc.Inner != nil:
		g = *doc.Inner
	}
	for name, v := range map[string]string{"id": g.ID, "requestDigest": g.RequestDigest, "nonce": g.Nonce, "outcome": g.Outcome, "expiresAt": g.ExpiresAt} {
		if v == "" {
			return holder.Gate{}, "", fmt.Errorf("the gate has no %q", name)
		}
	}
	return g, session, nil
}

// holderClient sends no credentials: holder requests carry no agent
// authority.
func holderClient(f *cmdutil.Factory) *holder.Client {
	return &holder.Client{HTTPClient: f.HTTPClient}
}

// holderError turns a refusal from the sandbox into the SDK's typed error,
// so that it prints and exits like any other API error.
func holderError(err error) error {
	var ae *holder.APIError
	if !errors.As(err, &ae) {
		return err
	}
	e := &sdk.Error{StatusCode: ae.StatusCode, BlockedBy: sdk.BlockedBy(ae.BlockedBy), Message: ae.Message, Retryable: ae.Retryable, Body: ae.Body}
	var env sdk.ErrorEnvelope
	if json.Unmarshal(ae.Body, &env) == nil {
		e.Actions = env.Actions
		if env.Details != nil {
			e.Details = *env.Details
		}
	}
	if e.BlockedBy == "" {
		e.Message = strings.TrimSpace(ae.Error())
	}
	return e
}

// decodedCompact is a compact JWS as a person reads it: its header and
// payload decoded (and any JWS inside them), its signature as sent. A
// string that is not a JWS is returned as it is.
func decodedCompact(jws string) string {
	v := cmdutil.ExpandJWS(jws)
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return jws
	}
	return string(b)
}

func holderOutput(io *cmdutil.IOStreams, asJSON bool, v map[string]any, text string) error {
	if asJSON {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return cmdutil.WriteRaw(io.Out, b)
	}
	return cmdutil.WriteRaw(io.Out, []byte(text))
}
