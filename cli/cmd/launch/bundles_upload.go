package launch

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
)

// UploadOptions are `pier bundles upload`'s.
type UploadOptions struct {
	Factory      *cmdutil.Factory
	Dir, Project string
}

// NewCmdBundlesUpload is `pier bundles upload`.
func NewCmdBundlesUpload(f *cmdutil.Factory, runF func(*UploadOptions) error) *cobra.Command {
	opts := &UploadOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "upload <dir>",
		Short: "Upload a directory as a bundle; launches nothing",
		Long: `Upload every file under a directory (hidden files left out, .well-known kept)
as one content-addressed bundle of up to 200,000 files. Files are hashed
locally and only the content the server lacks for your organisation is sent,
four files at a time, each streamed as it is read: after a change to one file,
one file is uploaded. An interrupted upload resumes where it stopped when run
again. Uploading the same files again returns the same bundle. Progress goes
to stderr on a terminal; --json prints the bundle's envelope.`,
		Example: `  pier bundles upload ./site --project prj_123
  pier bundles upload ./site --project prj_123 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if opts.Project == "" {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "required flag --project not set (or PIER_PROJECT)")
			}
			if runF != nil {
				return runF(opts)
			}
			return bundlesUpload(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Project, "project", f.Env("PIER_PROJECT"), "project id (env PIER_PROJECT)")
	return cmd
}

func bundlesUpload(ctx context.Context, o *UploadOptions) error {
	f := o.Factory
	ctx, cancel := f.Context(ctx)
	defer cancel()
	progress := cmdutil.NewProgress(f)
	env, st, err := uploadDir(ctx, f, progress, o.Dir, o.Project)
	progress.Done()
	if err != nil {
		return err
	}
	if f.Config.JSON {
		return cmdutil.PrintJSON(f.IO.Out, env)
	}
	d := env.Data
	fmt.Fprintf(f.IO.Out, "bundle %s: %d files, %d bytes (sha256 %s)\n", d.BundleId, d.FileCount, d.TotalBytes, d.Sha256[:12])
	fmt.Fprintf(f.IO.Out, "uploaded %d of %d files (%d bytes); the others were uploaded before\n", st.uploaded, st.files, st.uploadedBytes)
	return nil
}
