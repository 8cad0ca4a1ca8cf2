package launch

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/sdk"
)

// ExportOptions are `pier export`'s.
type ExportOptions struct {
	Factory *cmdutil.Factory
	// Project is the project whose leave package is written into the
	// directory Out.
	Project, Out string
	// Force writes into a directory that holds files, replacing them, so
	// the directory holds the package and nothing else.
	Force bool
}

// NewCmdExport is `pier export`.
func NewCmdExport(f *cmdutil.Factory, runF func(*ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "export <project-id>",
		Short: "Download a project's leave package and verify it",
		Long: `Download the leave package (site files, the zone file of every domain the
organisation owns, the audit ledger and a manifest of SHA-256 hashes) into
a directory, then check every file against the manifest and the ledger's
hash chain. Any mismatch exits non-zero. --json prints the API's envelope
once the files are written and verified.

The directory must be new or empty, so no file of an earlier export is
left beside the package unverified; --force empties it first.`,
		Example: `  pier export prj_123 --out ./leave
  pier export prj_123 --out ./leave --force
  pier ledger verify ./leave/ledger.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Project = args[0]
			entries, err := os.ReadDir(opts.Out)
			switch {
			case err == nil && len(entries) > 0 && !opts.Force:
				return cmdutil.UsageErrorf(cmd.CommandPath(), "%s is not empty (%d entries); its files would sit beside the package unverified: choose a new --out, or pass --force to empty it first", opts.Out, len(entries))
			case err != nil && !errors.Is(err, os.ErrNotExist):
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--out %s: %v", opts.Out, err)
			}
			if runF != nil {
				return runF(opts)
			}
			return export(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "directory to write the package into: new or empty (created)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "write into a directory that holds files, emptying it first")
	cmd.MarkFlagRequired("out")
	return cmd
}

func export(ctx context.Context, o *ExportOptions) error {
	f, out := o.Factory, o.Out
	ctx, cancel := f.Context(ctx)
	defer cancel()
	c, err := f.Client()
	if err != nil {
		return err
	}
	resp, err := c.Call(ctx, "POST", "/v1/projects/"+url.PathEscape(o.Project)+"/export", nil, nil, nil)
	if err != nil {
		return err
	}
	var pkg sdk.LeavePackageEnvelope
	if err := json.Unmarshal(resp.Body, &pkg); err != nil {
		return err
	}
	if o.Force {
		if err := emptyDir(out); err != nil {
			return err
		}
	}
	n, err := writeLeavePackage(out, &pkg.Data)
	if err != nil {
		return err
	}
	if f.Config.JSON {
		// The API's answer, as every --json prints; the files are
		// written and verified before it is.
		return cmdutil.WriteRaw(f.IO.Out, resp.Body)
	}
	fmt.Fprintf(f.IO.Out, "%d files written to %s and verified (manifest %s)\n", n, out, pkg.Data.ManifestSha256[:12])
	return nil
}

// emptyDir removes what dir holds, keeping dir; a missing dir is empty.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// writeLeavePackage writes and verifies a package: the manifest's hash, each
// file against the manifest, and the ledger's chain.
func writeLeavePackage(dir string, pkg *sdk.LeavePackage) (int, error) {
	byPath := map[string][]byte{}
	for _, f := range pkg.Files {
		if f.ContentBase64 == nil {
			return 0, fmt.Errorf("%s: no content in the package", f.Path)
		}
		data, err := base64.StdEncoding.DecodeString(*f.ContentBase64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f.Path, err)
		}
		if strings.Contains(f.Path, "..") || filepath.IsAbs(f.Path) {
			return 0, fmt.Errorf("%s: unsafe path in the package", f.Path)
		}
		byPath[f.Path] = data
	}
	manifest, ok := byPath["manifest.json"]
	if !ok {
		return 0, errors.New("the package has no manifest.json")
	}
	if sum := sha256.Sum256(manifest); hex.EncodeToString(sum[:]) != pkg.ManifestSha256 {
		return 0, errors.New("manifest.json does not match manifestSha256")
	}
	var m struct {
		Files []sdk.PackageFile `json:"files"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return 0, fmt.Errorf("manifest.json: %w", err)
	}
	if len(m.Files) != len(byPath)-1 {
		return 0, fmt.Errorf("the manifest lists %d files; the package holds %d", len(m.Files), len(byPath)-1)
	}
	for _, e := range m.Files {
		data, ok := byPath[e.Path]
		if !ok {
			return 0, fmt.Errorf("%s: listed in the manifest but missing", e.Path)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != e.Sha256 {
			return 0, fmt.Errorf("%s: SHA-256 does not match the manifest", e.Path)
		}
	}
	if lj, ok := byPath["ledger.jsonl"]; ok {
		entries, err := ledger.ReadJSONL(strings.NewReader(string(lj)))
		if err != nil {
			return 0, fmt.Errorf("ledger.jsonl: %w", err)
		}
		if b := ledger.Verify(entries); b != nil {
			return 0, fmt.Errorf("ledger.jsonl: %w", b)
		}
	}
	for p, data := range byPath {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return 0, err
		}
	}
	return len(byPath), nil
}
