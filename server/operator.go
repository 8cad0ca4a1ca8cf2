package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// clockTime is a time of day as a person reads it, with its zone, so the
// reader need not guess whose clock it is: 15:04 UTC, 16:04 CET.
func clockTime(t time.Time) string { return t.Local().Format("15:04 MST") }

// announceOperator prints a one-time sign-in link for the local operator of
// the first organisation, or, before any exists, how to start one.
func announceOperator(ctx context.Context, w io.Writer, accounts *service.Accounts, baseURL string, log *slog.Logger) {
	link, expires, err := accounts.LocalOperatorSignIn(ctx, "", "")
	switch {
	case errors.Is(err, service.ErrNoOrganization):
		fmt.Fprintf(w, "No organisation yet. An agent starts one with a signup, which a person reviews:\n  curl -X POST %s/v1/signup\n", baseURL)
	case err != nil:
		log.Warn("minting the local operator's sign-in link", "err", err)
	default:
		fmt.Fprintf(w, "Sign in as the local operator (works once, until %s):\n  %s\nMint another with: pier admin signin-link\n", clockTime(expires), link)
	}
}

func newSignInLinkCmd() *cobra.Command {
	var dataDir, databaseURL, baseURL, org, next string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "signin-link",
		Short: "Print a one-time sign-in link for the local operator",
		Long: `Print a one-time link that signs the local operator in to the human pages:
the dashboard, approvals, keys and card setup. The link works once, for 15
minutes. The local operator belongs to the first organisation (or --org) and
is created on first use.

The server prints one such link when it starts in embedded mode; this mints
another.`,
		Example: `  pier admin signin-link
  pier admin signin-link --next /approvals/gat_123
  pier admin signin-link --json | jq -r .url`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, note, err := openAdminStore(cmd, &dataDir, databaseURL)
			if err != nil {
				return err
			}
			defer st.Close()
			if baseURL == "" {
				baseURL = baseURLFor(env("PIER_HTTP_ADDR", "127.0.0.1:8080"))
				if ri, ok := runningServer(); ok && sameDir(ri.DataDir, dataDir) {
					baseURL = ri.BaseURL
				}
			}
			svc := service.New(service.Config{Store: st, BaseURL: func() string { return baseURL }})
			link, expires, err := svc.Accounts.LocalOperatorSignIn(ctx, org, next)
			if errors.Is(err, service.ErrNoOrganization) {
				return fmt.Errorf("no organisation yet in the %s: start one with a signup (curl -X POST %s/v1/signup) or pier admin create-key", note, baseURL)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"url": link, "expiresAt": expires.Format(time.RFC3339), "dataDir": dataDir})
			}
			fmt.Fprintln(cmd.OutOrStdout(), link)
			fmt.Fprintf(cmd.ErrOrStderr(), "Open it in a browser; it works once, until %s.\nIt was made in the %s.\n", clockTime(expires), note)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", DefaultDataDir(), "data directory (PIER_DATA_DIR)")
	f.StringVar(&databaseURL, "database-url", env("PIER_DATABASE_URL", ""), "PostgreSQL URL (PIER_DATABASE_URL)")
	f.StringVar(&baseURL, "base-url", env("PIER_BASE_URL", ""), "public base URL the link points at (PIER_BASE_URL; default from PIER_HTTP_ADDR)")
	f.StringVar(&org, "org", "", "organisation id (default: the first)")
	f.StringVar(&next, "next", "", "page to open after signing in, such as /approvals/gat_123")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// AgentKey is an agent key as created; its secret is shown this once and
// stored only as a hash.
type AgentKey struct {
	ID, OrgID, Secret string
	Scopes            []string
}

// createKey stores a new agent key of the organisation.
func createKey(ctx context.Context, st *store.Store, orgID, name string, scopes []string, now time.Time) (AgentKey, error) {
	secret, hash := auth.NewKey()
	k := store.APIKey{ID: auth.ID("key"), OrgID: orgID, Name: name, Scopes: scopes, CreatedAt: now}
	if err := st.Keys().Create(ctx, k, hash); err != nil {
		return AgentKey{}, err
	}
	return AgentKey{ID: k.ID, OrgID: orgID, Secret: secret, Scopes: scopes}, nil
}

// CreateOrganizationWithKey creates an organisation named name, with a
// default project, and an agent key in it holding scopes: an operator's
// first step, and every test's.
func (s *Server) CreateOrganizationWithKey(ctx context.Context, name string, scopes ...string) (AgentKey, error) {
	now := s.cfg.Now()
	o, err := s.store.Accounts().CreateOrganization(ctx, auth.ID("org"), name, now)
	if err != nil {
		return AgentKey{}, err
	}
	if err := ensureLocalProject(ctx, s.store, o.ID); err != nil {
		return AgentKey{}, err
	}
	return createKey(ctx, s.store, o.ID, "agent", scopes, now)
}
