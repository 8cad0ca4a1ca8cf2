package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// DefaultLocalBudgetMicro is the fake-money budget of the project created
// with the local operator's organisation.
const DefaultLocalBudgetMicro = 100_000_000

// ensureLocalProject gives a new local organisation a first project, so a
// fresh operator can launch right after creating a key.
func ensureLocalProject(ctx context.Context, st *store.Store, orgID string) error {
	ps, err := st.Projects().List(ctx, orgID)
	if err != nil || len(ps) > 0 {
		return err
	}
	_, err = service.New(service.Config{Store: st}).Projects.Create(ctx, service.NewProject{
		OrgID: orgID, Name: "default", LimitMicro: DefaultLocalBudgetMicro, Policy: service.DefaultPolicy(), CreatedBy: "operator:local",
	})
	return err
}

func newCreateProjectCmd() *cobra.Command {
	var dataDir, databaseURL, name, org, period, onExhausted string
	var budget float64
	var asJSON, noEgress bool
	cmd := &cobra.Command{
		Use:   "create-project",
		Short: "Create a project with a budget for the local operator's organisation",
		Long: `Create a project directly in the data directory, with a budget limit in USD
and the default policy (every domain purchase waits for a human unless the
key holds buy_domain). On a hosted deployment humans create projects on the
signup and dashboard pages instead.`,
		Example: `  pier admin create-project --name blog --budget-usd 50
  pier admin create-project --name blog --budget-usd 50 --json
  pier admin create-project --name jobs --no-service-egress   # its services reach no public network
  pier admin create-project --name shop --budget-usd 200 --budget-period lifetime --on-budget-exhausted pause_services`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if budget < 0 || budget > 1e6 {
				return fmt.Errorf("--budget-usd must be between 0 and 1000000")
			}
			ctx := cmd.Context()
			st, note, err := openAdminStore(cmd, &dataDir, databaseURL)
			if err != nil {
				return err
			}
			defer st.Close()
			o, err := orgFor(ctx, st, org, time.Now())
			if err != nil {
				return err
			}
			pol := service.DefaultPolicy()
			if noEgress {
				pol.Egress = service.EgressDenied
			}
			pol.BudgetPeriod = service.BudgetPeriod(period)
			if !pol.BudgetPeriod.Valid() {
				return fmt.Errorf("--budget-period must be monthly or lifetime")
			}
			pol.OnExhausted = service.OnExhausted(onExhausted)
			if !pol.OnExhausted.Valid() {
				return fmt.Errorf("--on-budget-exhausted must be stop_spending or pause_services")
			}
			p, err := service.New(service.Config{Store: st}).Projects.Create(ctx, service.NewProject{
				OrgID: o.ID, Name: name, LimitMicro: money.FromUSD(budget), Policy: pol, CreatedBy: "operator:local",
			})
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"projectId": p.ID, "organizationId": o.ID, "budgetLimitUsd": budget, "dataDir": dataDir})
			}
			fmt.Fprintln(cmd.OutOrStdout(), p.ID)
			fmt.Fprintf(cmd.ErrOrStderr(), "Created project %s in organisation %s (%s).\n", p.ID, o.ID, note)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", DefaultDataDir(), "data directory (PIER_DATA_DIR)")
	f.StringVar(&databaseURL, "database-url", env("PIER_DATABASE_URL", ""), "PostgreSQL URL (PIER_DATABASE_URL)")
	f.StringVar(&name, "name", "default", "project name")
	f.StringVar(&org, "org", "", "organisation id (default: the first, created if none)")
	f.Float64Var(&budget, "budget-usd", 100, "budget limit in USD (fake money in the sandbox)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&period, "budget-period", "monthly", "monthly: the budget is spent per calendar month (UTC) and starts again each month; lifetime: spent once")
	f.StringVar(&onExhausted, "on-budget-exhausted", "stop_spending", "at 100 % of the period's budget: stop_spending refuses new spending; pause_services also stops running services")
	f.BoolVar(&noEgress, "no-service-egress", false, "the project's process and worker services reach no public network (policy serviceEgress: denied)")
	return cmd
}
