package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/ledger"
)

// The ledger commands that are not API operations: export pages through the
// organisation's chain with the SDK; verify checks an exported chain offline
// with the ledger package alone, sharing no code with the server that wrote it.

// ErrLedgerBroken is returned when a chain fails verification.
var ErrLedgerBroken = errors.New("the ledger does not verify")

// LedgerVerifyOptions are `pier ledger verify`'s inputs.
type LedgerVerifyOptions struct {
	IO   *cmdutil.IOStreams
	File string
	// Partial accepts a chain that starts after the first entry.
	Partial bool
	JSON    bool
}

// NewCmdLedgerVerify builds `pier ledger verify FILE`.
func NewCmdLedgerVerify(f *cmdutil.Factory, runF func(*LedgerVerifyOptions) error) *cobra.Command {
	opts := &LedgerVerifyOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "verify <file>",
		Short: "Check an exported ledger's hash chain offline",
		Long: `Check an exported ledger (JSON lines, as written by 'pier ledger export'
or downloaded from the dashboard) without contacting any server.

Every entry's hash must match its contents, every prevHash the entry before
it, and sequence numbers must run without gaps from 1 (or from the first
entry, with --partial). The first broken link is reported and the command
exits non-zero. "-" reads standard input.`,
		Example: `  pier ledger export --out ledger.jsonl
  pier ledger verify ledger.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File, opts.JSON = args[0], f.Config.JSON
			if runF != nil {
				return runF(opts)
			}
			return ledgerVerifyRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Partial, "partial", false, "accept a chain that does not start at the first entry")
	return cmd
}

func ledgerVerifyRun(opts *LedgerVerifyOptions) error {
	var r io.Reader = opts.IO.In
	if opts.File != "-" {
		file, err := os.Open(opts.File)
		if err != nil {
			return &cmdutil.UsageError{Err: err, Command: "pier ledger verify"}
		}
		defer file.Close()
		r = file
	}
	entries, err := ledger.ReadJSONL(r)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrLedgerBroken, opts.File, err)
	}
	broken := ledger.Verify(entries)
	if broken == nil && len(entries) > 0 && !opts.Partial && entries[0].Seq != 1 {
		broken = &ledger.BrokenLink{Index: 0, Seq: entries[0].Seq, Reason: "the chain does not start at entry 1 (pass --partial for a slice)"}
	}
	if opts.JSON {
		out := map[string]any{"file": opts.File, "entries": len(entries), "valid": broken == nil}
		if broken != nil {
			out["brokenAt"] = map[string]any{"index": broken.Index + 1, "seq": broken.Seq, "reason": broken.Reason}
		} else if len(entries) > 0 {
			out["headHash"] = entries[len(entries)-1].Hash
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(opts.IO.Out, string(b))
	}
	if broken != nil {
		return fmt.Errorf("%w: %s: %v", ErrLedgerBroken, opts.File, broken)
	}
	if len(entries) == 0 {
		return fmt.Errorf("%w: %s holds no entries", ErrLedgerBroken, opts.File)
	}
	if !opts.JSON {
		fmt.Fprintf(opts.IO.Out, "%s: %d entries, chain intact, head %s\n", opts.File, len(entries), entries[len(entries)-1].Hash)
	}
	return nil
}

// LedgerExportOptions are `pier ledger export`'s inputs.
type LedgerExportOptions struct {
	IO       *cmdutil.IOStreams
	Out      string
	PageSize int
	Fetch    func(ctx context.Context, after, limit int) ([]byte, error)
}

// NewCmdLedgerExport builds `pier ledger export`.
func NewCmdLedgerExport(f *cmdutil.Factory, runF func(*LedgerExportOptions) error) *cobra.Command {
	opts := &LedgerExportOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the organisation's whole ledger to a file, for offline checks",
		Long: `Page through the organisation's audit ledger (GET /v1/ledger) and write every
entry as one JSON line, exactly as the server sent it. Check the file
offline with 'pier ledger verify'. "-" writes standard output.`,
		Example: `  pier ledger export --out ledger.jsonl
  pier ledger export --out - | pier ledger verify -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.PageSize < 1 || opts.PageSize > 1000 {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--page-size must be 1 to 1000")
			}
			client, err := f.Client()
			if err != nil {
				return err
			}
			opts.Fetch = func(ctx context.Context, after, limit int) ([]byte, error) {
				q := url.Values{"after": {strconv.Itoa(after)}, "limit": {strconv.Itoa(limit)}}
				resp, err := client.Call(ctx, "GET", "/v1/ledger", q, nil, nil)
				if err != nil {
					return nil, err
				}
				return resp.Body, nil
			}
			if runF != nil {
				return runF(opts)
			}
			ctx, cancel := f.Context(cmd.Context())
			defer cancel()
			return ledgerExportRun(ctx, opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "out", "o", "", "file to write (required; - for standard output)")
	cmd.Flags().IntVar(&opts.PageSize, "page-size", 1000, "entries per request")
	cmd.MarkFlagRequired("out")
	return cmd
}

func ledgerExportRun(ctx context.Context, opts *LedgerExportOptions) error {
	var entries []ledger.Entry
	after := 0
	for {
		body, err := opts.Fetch(ctx, after, opts.PageSize)
		if err != nil {
			return err
		}
		// Numbers stay as the server wrote them, so entries hash the same.
		var env struct {
			Data struct {
				Entries []json.RawMessage `json:"entries"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			return fmt.Errorf("reading the ledger page after %d: %w", after, err)
		}
		for _, raw := range env.Data.Entries {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var e ledger.Entry
			if err := dec.Decode(&e); err != nil {
				return fmt.Errorf("reading a ledger entry: %w", err)
			}
			entries = append(entries, e)
		}
		if len(env.Data.Entries) < opts.PageSize {
			break
		}
		after = int(entries[len(entries)-1].Seq)
	}
	w := opts.IO.Out
	if opts.Out != "-" {
		file, err := os.Create(opts.Out)
		if err != nil {
			return &cmdutil.UsageError{Err: err, Command: "pier ledger export"}
		}
		defer file.Close()
		w = file
	}
	if err := ledger.WriteJSONL(w, entries); err != nil {
		return err
	}
	head := ledger.Genesis
	if len(entries) > 0 {
		head = entries[len(entries)-1].Hash
	}
	fmt.Fprintf(opts.IO.ErrOut, "Exported %d entries (head %s)", len(entries), head)
	if opts.Out != "-" {
		fmt.Fprintf(opts.IO.ErrOut, " to %s", opts.Out)
	}
	fmt.Fprintln(opts.IO.ErrOut)
	return nil
}

// AddCommands puts verify and export beside the generated
// `pier ledger list`.
func AddCommands(root *cobra.Command, f *cmdutil.Factory) {
	if group := cmdutil.Subcommand(root, "ledger"); group != nil {
		group.AddCommand(NewCmdLedgerVerify(f, nil), NewCmdLedgerExport(f, nil))
	}
}
