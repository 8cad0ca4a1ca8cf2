package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/server/internal/sandbox"
	"github.com/pierhq/pier/server/internal/store"
)

func newSandbox(ctx context.Context, cfg Config, st *store.Store, log *slog.Logger, baseURL func() string) (*sandbox.Service, error) {
	keys, err := sandbox.LoadKeys(ctx, st, cfg.DataDir, cfg.Now())
	if err != nil {
		return nil, err
	}
	return sandbox.New(sandbox.Config{Store: st, Keys: keys, Now: cfg.Now, Log: log, BaseURL: baseURL})
}

// newSandboxCmd is `pier sandbox publish-reference`; the CLI places it
// beside the generated `pier sandbox` operation commands.
func newSandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Fake-money sandbox sessions, attempts, gates and proofs",
	}
	var cfg Config
	var replace, asJSON bool
	publish := &cobra.Command{
		Use:   "publish-reference",
		Short: "Mint and publish the sandbox reference release",
		Long: `Run a whole sandbox session with a simulated holder, mint its proof, and
publish the reference release: proof.json, both JWKS snapshots, the
provenance (an unsigned observation of this build) and the two scripts,
with /.well-known/sandbox-reference.json turning "available" only once every
file is stored. The release is verified as an auditor would before it is
published. It acts on the data directory or database directly, so a running
server serves the new release at once.

A published release is immutable: without --replace the command keeps it
and prints its manifest. The server also publishes one on its first start.`,
		Example: `  pier sandbox publish-reference
  pier sandbox publish-reference --database-url postgres://pier@localhost/pier --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.setDefaults()
			ctx := cmd.Context()
			st, err := store.Open(ctx, cfg.DataDir, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer st.Close()
			log := newLogger(cmd.ErrOrStderr(), "warn", "text")
			sb, err := newSandbox(ctx, cfg, st, log, func() string { return cfg.BaseURL })
			if err != nil {
				return err
			}
			pub, err := sb.PublishReference(ctx, sandbox.PublishOptions{Replace: replace})
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
					"releaseId": pub.ReleaseID, "proofId": pub.ProofID, "created": pub.Created, "manifest": json.RawMessage(pub.Manifest),
				})
			}
			if pub.Created {
				fmt.Fprintf(cmd.ErrOrStderr(), "Published reference release %s with proof %s.\n", pub.ReleaseID, pub.ProofID)
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "Reference release %s (proof %s) is already published and stays; --replace mints a new one.\n", pub.ReleaseID, pub.ProofID)
			}
			_, err = cmd.OutOrStdout().Write(pub.Manifest)
			return err
		},
	}
	f := publish.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", DefaultDataDir(), "data directory (PIER_DATA_DIR)")
	f.StringVar(&cfg.DatabaseURL, "database-url", env("PIER_DATABASE_URL", ""), "PostgreSQL URL (PIER_DATABASE_URL)")
	f.BoolVar(&replace, "replace", false, "publish a new release even when one is published (caches may keep the old files)")
	f.BoolVar(&asJSON, "json", false, "print the release id, proof id and manifest as JSON")
	cmd.AddCommand(publish)
	return cmd
}
