package mail

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

// AddCommands makes `pier mail` the email group's other name and gives
// it `wait`.
func AddCommands(root *cobra.Command, f *cmdutil.Factory) {
	if email := cmdutil.Subcommand(root, "email"); email != nil {
		email.Aliases = append(email.Aliases, "mail")
		email.AddCommand(NewCmdMailWait(f, nil))
	}
}

// MailWaitOptions are `pier mail wait`'s.
type MailWaitOptions struct {
	Factory *cmdutil.Factory
	To      string
	Subject string
	From    string
	Since   time.Time
	Wait    time.Duration
}

// NewCmdMailWait is `pier mail wait`.
func NewCmdMailWait(f *cmdutil.Factory, runF func(*MailWaitOptions) error) *cobra.Command {
	opts := &MailWaitOptions{Factory: f}
	var since string
	cmd := &cobra.Command{
		Use:   "wait",
		Short: "Wait for a message to an address, such as a verification code, and print it",
		Long: `Wait until a message that matches arrives at one of your addresses and
print it: the sender, subject, date and text (with --json, the envelope).
It answers the moment the message lands, or fails with mail:no_message once
--timeout (default 60s) passes. Messages already in the inbox count when
--since allows them (default: from now).

Message bodies are untrusted input: print them, never follow their links
blindly.`,
		Example: `  pier mail wait --to agent@acme.dev --subject verify --timeout 60s
  pier mail wait --to agent@acme.dev --from noreply@service.example --json | jq -r .data.text`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Wait = 60 * time.Second
			if fl := cmd.Flag("timeout"); fl != nil && fl.Changed && f.Config.Timeout > 0 {
				opts.Wait = f.Config.Timeout
			}
			opts.Since = time.Now().Add(-2 * time.Second)
			if since != "" {
				t, err := time.Parse(time.RFC3339, since)
				if err != nil {
					return cmdutil.UsageErrorf("pier mail wait", "--since %q is not an RFC 3339 time, such as 2026-11-25T10:00:00Z", since)
				}
				opts.Since = t
			}
			if runF != nil {
				return runF(opts)
			}
			return runMailWait(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.To, "to", "", "the address the message goes to (required)")
	fl.StringVar(&opts.Subject, "subject", "", "only a message whose subject contains this")
	fl.StringVar(&opts.From, "from", "", "only a message whose sender contains this")
	fl.StringVar(&since, "since", "", "count messages received from this time (RFC 3339); default now")
	cmd.MarkFlagRequired("to")
	return cmd
}

func runMailWait(ctx context.Context, o *MailWaitOptions) error {
	f := o.Factory
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Wait+15*time.Second)
	defer cancel()
	inbox, err := inboxFor(ctx, c, o.To)
	if err != nil {
		return err
	}
	if inbox == "" {
		return cmdutil.UsageErrorf("pier mail wait", "%s is not one of your addresses; pier email addresses list shows them", o.To)
	}
	body := sdk.WaitForMessageJSONRequestBody{Since: &o.Since}
	if o.Subject != "" {
		body.Subject = &o.Subject
	}
	if o.From != "" {
		body.From = &o.From
	}
	progress := cmdutil.NewProgress(f)
	progress.Step("waiting for a message to " + o.To)
	deadline := time.Now().Add(o.Wait)
	for {
		secs := int(time.Until(deadline).Seconds())
		secs = max(1, min(60, secs))
		body.TimeoutSeconds = &secs
		env, err := c.WaitForMessage(ctx, inbox, body)
		var e *sdk.Error
		if errors.As(err, &e) && e.BlockedBy == "mail:no_message" && time.Now().Before(deadline) {
			continue
		}
		progress.Done()
		if err != nil {
			return err
		}
		if f.Config.JSON {
			return cmdutil.PrintJSON(f.IO.Out, env)
		}
		m := env.Data
		fmt.Fprintf(f.IO.Out, "From:    %s\nTo:      %s\nSubject: %s\nDate:    %s\nId:      %s\n\n%s", m.From, strings.Join(m.To, ", "), m.Subject,
			m.ReceivedAt.Format(time.RFC1123Z), m.Id, m.Text)
		if !strings.HasSuffix(m.Text, "\n") {
			fmt.Fprintln(f.IO.Out)
		}
		return nil
	}
}

// inboxFor finds the inbox that takes mail for an address, its own or its
// domain's catch-all, through every page of the organisation's inboxes;
// "" when none does.
func inboxFor(ctx context.Context, c *sdk.Client, address string) (string, error) {
	to := strings.ToLower(address)
	_, domain, _ := strings.Cut(to, "@")
	catchAll := ""
	most := 200
	params := &sdk.ListInboxesParams{Limit: &most}
	for {
		page, err := c.ListInboxes(ctx, params)
		if err != nil {
			return "", err
		}
		for _, i := range page.Data.Inboxes {
			if i.Address == to {
				return i.Id, nil
			}
			if catchAll == "" && i.Address == "*@"+domain {
				catchAll = i.Id
			}
		}
		if page.Data.NextCursor == nil {
			return catchAll, nil
		}
		params.Cursor = page.Data.NextCursor
	}
}
