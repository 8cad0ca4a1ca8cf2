package cli

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/sdk"
)

// addLaunchCommands adds the hand-written commands that chain operations:
// `pier bundles upload`, `pier launch` and `pier export`.
func addLaunchCommands(root *cobra.Command, f *Factory) {
	for _, c := range root.Commands() {
		if c.Name() == "bundles" {
			c.AddCommand(NewCmdBundlesUpload(f, nil))
		}
	}
	launch := NewCmdLaunch(f, nil)
	launch.GroupID = GroupOperations
	export := NewCmdExport(f, nil)
	export.GroupID = GroupOperations
	root.AddCommand(launch, export)
}

// readSite walks a directory into upload files. Hidden files and folders
// are left out, except .well-known.
func readSite(dir string) ([]sdk.AssetFile, int64, error) {
	var files []sdk.AssetFile
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		name := d.Name()
		if rel != "." && strings.HasPrefix(name, ".") && name != ".well-known" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		total += int64(len(data))
		files = append(files, sdk.AssetFile{Path: filepath.ToSlash(rel), ContentBase64: base64.StdEncoding.EncodeToString(data)})
		return nil
	})
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%s holds no files to upload", dir)
	}
	return files, total, err
}

// UploadOptions are `pier bundles upload`'s.
type UploadOptions struct {
	Factory      *Factory
	Dir, Project string
}

// NewCmdBundlesUpload is `pier bundles upload`.
func NewCmdBundlesUpload(f *Factory, runF func(*UploadOptions) error) *cobra.Command {
	opts := &UploadOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "upload <dir>",
		Short: "Upload a directory as a bundle; launches nothing",
		Long: `Upload every file under a directory (hidden files left out, .well-known kept)
as one content-addressed bundle. Uploading the same files again returns the
same bundle.`,
		Example: `  pier bundles upload ./site --project prj_123
  pier bundles upload ./site --project prj_123 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if runF != nil {
				return runF(opts)
			}
			return bundlesUpload(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Project, "project", os.Getenv("PIER_PROJECT"), "project id (env PIER_PROJECT)")
	cmd.MarkFlagRequired("project")
	return cmd
}

func bundlesUpload(ctx context.Context, o *UploadOptions) error {
	f := o.Factory
	ctx, cancel := f.context(ctx)
	defer cancel()
	env, err := uploadDir(ctx, f, o.Dir, o.Project)
	if err != nil {
		return err
	}
	if f.Config.JSON {
		return printJSON(f.IO.Out, env)
	}
	d := env.Data
	fmt.Fprintf(f.IO.Out, "bundle %s: %d files, %d bytes (sha256 %s)\n", d.BundleId, d.FileCount, d.TotalBytes, d.Sha256[:12])
	return nil
}

func uploadDir(ctx context.Context, f *Factory, dir, project string) (*sdk.BundleEnvelope, error) {
	files, _, err := readSite(dir)
	if err != nil {
		return nil, usageErrorf("pier bundles upload", "%v", err)
	}
	c, err := f.Client()
	if err != nil {
		return nil, err
	}
	return c.UploadAssets(ctx, &sdk.UploadAssetsParams{}, sdk.UploadAssetsJSONRequestBody{ProjectId: project, Files: files})
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// LaunchOptions are `pier launch`'s.
type LaunchOptions struct {
	Factory                    *Factory
	Dir, Project, Name, Domain string
	Years                      int
	Wait                       bool
}

var labelRE = regexp.MustCompile(`[^a-z0-9-]+`)

func defaultName(dir string) string {
	abs, _ := filepath.Abs(dir)
	n := strings.Trim(labelRE.ReplaceAllString(strings.ToLower(filepath.Base(abs)), "-"), "-")
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		n = "site"
	}
	if len(n) > 40 {
		n = n[:40]
	}
	return n
}

// NewCmdLaunch is `pier launch`.
func NewCmdLaunch(f *Factory, runF func(*LaunchOptions) error) *cobra.Command {
	opts := &LaunchOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "launch <dir>",
		Short: "Upload a site, quote it, launch it and wait for HTTPS",
		Long: `Upload a directory, quote what the launch costs (a domain, when --domain
is given), launch it on the edge and wait until it is served over HTTPS.

Progress goes to stderr. Stdout gets the preview URL (and the domain's URL)
first, then the service and task ids; with --json, each envelope in turn,
the last being the finished task (serviceId, taskId, previewUrl,
domainUrl). It waits by default; --no-wait returns once the launch is
accepted. When a human must approve (buying a domain without the buy_domain
scope, or a quote over the project's approval threshold), the service,
preview URL and task are printed, the approval URL goes to stderr, and the
command exits with code 5, with --no-wait too; run pier tasks get TASK_ID
later.`,
		Example: `  pier launch ./examples/site
  pier launch ./site --project prj_123 --domain acme.dev
  pier launch ./site --project prj_123 --json --no-wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if opts.Name == "" {
				opts.Name = defaultName(opts.Dir)
			}
			opts.Wait = !f.Config.NoWait
			if runF != nil {
				return runF(opts)
			}
			if opts.Project == "" {
				p, err := onlyProject(cmd.Context(), f)
				if err != nil {
					return err
				}
				opts.Project = p
			}
			return runLaunch(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Project, "project", os.Getenv("PIER_PROJECT"), "project id (env PIER_PROJECT)")
	fl.StringVar(&opts.Name, "name", "", "service name (default: the directory's name)")
	fl.StringVar(&opts.Domain, "domain", "", "also register this domain and serve the site on it")
	fl.IntVar(&opts.Years, "years", 1, "registration years for --domain")
	return cmd
}

// onlyProject picks the organisation's project when it has exactly one.
func onlyProject(ctx context.Context, f *Factory) (string, error) {
	c, err := f.Client()
	if err != nil {
		return "", err
	}
	l, err := c.ListProjects(ctx)
	if err != nil {
		return "", err
	}
	switch ps := l.Data.Projects; len(ps) {
	case 1:
		return ps[0].Id, nil
	case 0:
		return "", usageErrorf("pier launch", "the organisation has no project; a human creates one (pier admin create-project locally)")
	default:
		ids := make([]string, len(ps))
		for i, p := range ps {
			ids[i] = p.Id + " (" + p.Name + ")"
		}
		return "", usageErrorf("pier launch", "choose a project with --project: %s", strings.Join(ids, ", "))
	}
}

func runLaunch(ctx context.Context, f *Factory, o *LaunchOptions) error {
	ctx, cancel := f.context(ctx)
	defer cancel()
	c, err := f.Client()
	if err != nil {
		return err
	}
	progress := newProgress(f)
	emit := func(v any) error {
		if f.Config.JSON {
			return printJSON(f.IO.Out, v)
		}
		return nil
	}

	progress.step("uploading " + o.Dir)
	bundle, err := uploadDir(ctx, f, o.Dir, o.Project)
	if err != nil {
		progress.done()
		return err
	}
	if err := emit(bundle); err != nil {
		return err
	}
	body := sdk.LaunchServiceJSONRequestBody{Name: o.Name, Target: "edge", BundleId: &bundle.Data.BundleId}
	if o.Domain != "" {
		progress.step("quoting " + o.Domain)
		years := o.Years
		q, err := c.CreateQuote(ctx, &sdk.CreateQuoteParams{}, sdk.CreateQuoteJSONRequestBody{ProjectId: o.Project,
			Items: []sdk.QuoteItem{{Kind: sdk.Domain, Domain: &o.Domain, Years: &years}}})
		if err != nil {
			progress.done()
			return err
		}
		if err := emit(q); err != nil {
			return err
		}
		// A quote over the approval threshold still launches: the launch
		// waits on the quote's gate, in input_required with its approval URL.
		if q.Data.Decision != sdk.ALLOW && q.Data.Decision != sdk.REQUIRESAPPROVAL {
			progress.done()
			reasons := make([]string, len(q.Data.Reasons))
			for i, r := range q.Data.Reasons {
				reasons[i] = string(r)
			}
			code := sdk.BlockedBy("budget:insufficient")
			if len(q.Data.Reasons) > 0 {
				code = q.Data.Reasons[0]
			}
			return &sdk.Error{StatusCode: 201, BlockedBy: code, Message: fmt.Sprintf("the quote was %s (%s)", q.Data.Decision, strings.Join(reasons, ", ")), Actions: q.Actions}
		}
		body.Domain, body.QuoteId, body.Years = &o.Domain, &q.Data.QuoteId, &years
	}
	progress.step("launching " + o.Name)
	launched, err := c.LaunchService(ctx, o.Project, &sdk.LaunchServiceParams{}, body)
	if err != nil {
		progress.done()
		return err
	}
	if err := emit(launched); err != nil {
		return err
	}
	if !o.Wait {
		progress.done()
		t := launched.Data
		if t.State == sdk.TaskHandleStateInputRequired {
			return launchAwaitsHuman(f, o, t, launched.Data)
		}
		if !f.Config.JSON {
			printLaunchHandle(f, t)
			fmt.Fprintf(f.IO.Out, "Next: pier tasks get %s\n", t.TaskId)
		}
		return nil
	}
	final, err := c.WaitForTask(ctx, launched.Data.TaskId, sdk.WaitOptions{Interval: 200 * time.Millisecond, OnProgress: func(t *sdk.TaskHandle) {
		for _, s := range t.Steps {
			if s.State == sdk.TaskStepStateRunning || s.State == sdk.TaskStepStateInputRequired {
				progress.step(string(s.Name) + " (" + string(s.State) + ")")
				return
			}
		}
		progress.step(string(t.State))
	}})
	progress.done()
	if final != nil {
		if err := emit(final); err != nil {
			return err
		}
	}
	var ir *sdk.InputRequiredError
	if errors.As(err, &ir) {
		t := launched.Data
		if ir.Task != nil {
			t = *ir.Task
		}
		if t.ApprovalUrl == nil && ir.ApprovalURL != "" {
			t.ApprovalUrl = &ir.ApprovalURL
		}
		return launchAwaitsHuman(f, o, t, launched.Data)
	}
	if err != nil {
		return err
	}
	if !f.Config.JSON {
		t := final.Data
		if t.PreviewUrl != nil {
			fmt.Fprintln(f.IO.Out, *t.PreviewUrl)
		}
		if t.DomainUrl != nil {
			fmt.Fprintln(f.IO.Out, *t.DomainUrl)
		}
		fmt.Fprintf(f.IO.Out, "service %s\ntask    %s (%s)\n", deref(t.ServiceId), t.TaskId, t.State)
		if t.ServiceId != nil {
			fmt.Fprintf(f.IO.Out, "Next: pier services get %s\n      pier services teardown %s\n", *t.ServiceId, *t.ServiceId)
		}
	}
	return nil
}

// printLaunchHandle prints what a launch made that is not finished yet:
// the service, its preview URL (and domain URL), and the task.
func printLaunchHandle(f *Factory, t sdk.TaskHandle) {
	fmt.Fprintf(f.IO.Out, "service %s\n", deref(t.ServiceId))
	if t.PreviewUrl != nil {
		fmt.Fprintf(f.IO.Out, "preview %s\n", *t.PreviewUrl)
	}
	if t.DomainUrl != nil {
		fmt.Fprintf(f.IO.Out, "domain  %s\n", *t.DomainUrl)
	}
	fmt.Fprintf(f.IO.Out, "task    %s (%s)\n", t.TaskId, t.State)
}

// launchAwaitsHuman reports a launch in input_required, whether the launch's
// own answer or the wait found it there: the service, preview URL and task
// on stdout, the approval URL on stderr, and exit code 5. accepted is the
// launch's 202 answer, whose ids fill in what t lacks.
func launchAwaitsHuman(f *Factory, o *LaunchOptions, t, accepted sdk.TaskHandle) error {
	if t.ServiceId == nil {
		t.ServiceId = accepted.ServiceId
	}
	if t.PreviewUrl == nil {
		t.PreviewUrl = accepted.PreviewUrl
	}
	url := deref(t.ApprovalUrl)
	if !f.Config.JSON {
		printLaunchHandle(f, t)
		fmt.Fprintf(f.IO.ErrOut, "A human must approve this launch: %s\nThen follow the task with: pier tasks get %s\n", url, t.TaskId)
	}
	msg := "a human must approve this launch"
	if o.Domain != "" {
		msg += " of " + o.Domain
	}
	return &ErrInputRequired{ApprovalURL: url, TaskID: t.TaskId, Message: msg}
}

// progress shows the current step on stderr: a spinner on a terminal, a
// line per change otherwise. Nothing goes to stdout.
type progress struct {
	f      *Factory
	tty    bool
	last   string
	frame  int
	active bool
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func newProgress(f *Factory) *progress {
	return &progress{f: f, tty: f.IO.StderrIsTerminal != nil && f.IO.StderrIsTerminal()}
}

func (p *progress) step(s string) {
	if p.f.Config.JSON && !p.tty {
		return
	}
	if p.tty {
		p.frame++
		fmt.Fprintf(p.f.IO.ErrOut, "\r\033[K%s %s", spinner[p.frame%len(spinner)], s)
		p.active = true
		return
	}
	if s != p.last {
		fmt.Fprintf(p.f.IO.ErrOut, "… %s\n", s)
	}
	p.last = s
}

func (p *progress) done() {
	if p.tty && p.active {
		fmt.Fprint(p.f.IO.ErrOut, "\r\033[K")
		p.active = false
	}
}

// ExportOptions are `pier export`'s.
type ExportOptions struct {
	Factory *Factory
	Project string
	Out     string
}

// NewCmdExport is `pier export`.
func NewCmdExport(f *Factory, runF func(*ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "export <project-id>",
		Short: "Download a project's leave package and verify it",
		Long: `Download the leave package (site files, the zone file of every domain the
organisation owns, the audit ledger and a manifest of SHA-256 hashes) into
a directory, then check every file against the manifest and the ledger's
hash chain. Any mismatch exits non-zero. --json prints the API's envelope
once the files are written and verified.`,
		Example: `  pier export prj_123 --out ./leave
  pier ledger verify ./leave/ledger.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Project = args[0]
			if runF != nil {
				return runF(opts)
			}
			return export(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "directory to write the package into (created)")
	cmd.MarkFlagRequired("out")
	return cmd
}

func export(ctx context.Context, o *ExportOptions) error {
	f, out := o.Factory, o.Out
	ctx, cancel := f.context(ctx)
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
	n, err := writeLeavePackage(out, &pkg.Data)
	if err != nil {
		return err
	}
	if f.Config.JSON {
		// The API's answer, as every --json prints; the files are
		// written and verified before it is.
		return writeRaw(f.IO.Out, resp.Body)
	}
	fmt.Fprintf(f.IO.Out, "%d files written to %s and verified (manifest %s)\n", n, out, pkg.Data.ManifestSha256[:12])
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

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
