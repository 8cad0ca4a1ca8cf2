package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

// digestFiles is the size of the large site: Cloudflare Pages' file cap.
const digestFiles = 20000

// BenchmarkDigestDeploy times, on the embedded defaults (SQLite, the local
// CA), the CLI's digest deploy of a static site of 20,000 files of 1 KiB:
//
//   - first-s: `pier launch DIR` of a site the server has none of (every
//     file hashed, asked for, streamed four at a time, the bundle created,
//     the launch waited for) until the first HTTPS 200 at its preview URL;
//   - one-file-ms: then one file changed and `pier launch DIR` again (a new
//     version of the same service, with the digest cache the first launch
//     left), until the changed file is served over HTTPS;
//   - 50-files-one-file-ms: the same one-file relaunch for a site of 50
//     files of 1 KiB;
//   - upload-s: of first-s, the time `pier bundles upload DIR` takes for
//     another site of the same shape, new to the server: hashing, asking,
//     uploading and creating the bundle, without the launch;
//   - files-sent-after-one-change: what the 20,000-file relaunch uploaded,
//     from its progress on stderr.
//
// Each operation is one fresh site on one server (kept across operations,
// so later ones run against a larger store). The CLI runs in-process, as
// `pier` would, against the server over loopback HTTP. Goals (issue 19):
// first-s <= 5, one-file-ms <= 300, and the relaunch sends one file.
func BenchmarkDigestDeploy(b *testing.B) {
	dir := b.TempDir()
	key, project := adminSetup(b, dir)
	s := serveOn(b, dir)
	api := "http://" + s.Addr()
	site := siteClient(s)
	cacheDir := b.TempDir()
	cli := &pierCLI{b: b, env: map[string]string{"PIER_BASE_URL": api, "PIER_API_KEY": key, "PIER_CACHE_DIR": cacheDir}}
	pier := cli.run
	served := func(url, path string, want []byte, start time.Time) { waitServed(b, site, url, path, want, start) }

	var first, oneFile, smallOneFile, upload []time.Duration
	var relaunchSent int
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		siteDir := filepath.Join(b.TempDir(), "site")
		writeDigestSite(b, siteDir, digestFiles)
		other := filepath.Join(b.TempDir(), "site")
		writeDigestSite(b, other, digestFiles)
		name := fmt.Sprintf("big%d", n)
		// The 40,000 files just written are flushed first, so that the
		// disk is not busy writing them back while the deploy is timed.
		syscall.Sync()
		b.StartTimer()

		start := time.Now()
		out, _ := pier("launch", siteDir, "--project", project, "--name", name)
		preview := launchedPreviewURL(b, out)
		index, _ := os.ReadFile(filepath.Join(siteDir, "index.html"))
		served(preview, "/", index, start)
		first = append(first, time.Since(start))

		changed := []byte(fmt.Sprintf("<!doctype html><h1>changed %d</h1>", n))
		if err := os.WriteFile(filepath.Join(siteDir, "p/00/0007.html"), changed, 0o644); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		_, progress := pier("launch", siteDir, "--project", project, "--name", name)
		served(preview, "/p/00/0007.html", changed, start)
		oneFile = append(oneFile, time.Since(start))
		// The progress on stderr says how many files the relaunch sent.
		if sm := sendingRE.FindStringSubmatch(progress); sm != nil {
			relaunchSent, _ = strconv.Atoi(sm[1])
		} else {
			b.Fatalf("the relaunch's progress names no upload:\n%s", progress)
		}

		// The same for a site of 50 files.
		b.StopTimer()
		small := filepath.Join(b.TempDir(), "small")
		writeDigestSite(b, small, 50)
		out, _ = pier("launch", small, "--project", project, "--name", name+"-small")
		smallPreview := launchedPreviewURL(b, out)
		if err := os.WriteFile(filepath.Join(small, "p/00/0007.html"), changed, 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start = time.Now()
		pier("launch", small, "--project", project, "--name", name+"-small")
		served(smallPreview, "/p/00/0007.html", changed, start)
		smallOneFile = append(smallOneFile, time.Since(start))

		start = time.Now()
		out, _ = pier("bundles", "upload", other, "--project", project)
		upload = append(upload, time.Since(start))
		if um := uploadedRE.FindStringSubmatch(out); um == nil || um[1] != um[2] {
			b.Fatalf("a new site's upload sent %v", um)
		}
	}
	b.StopTimer()

	b.ReportMetric(percentile(first, 0.5).Seconds(), "first-s")
	b.ReportMetric(float64(percentile(oneFile, 0.5).Microseconds())/1000, "one-file-ms")
	b.ReportMetric(float64(percentile(smallOneFile, 0.5).Microseconds())/1000, "50-files-one-file-ms")
	b.ReportMetric(percentile(upload, 0.5).Seconds(), "upload-s")
	b.ReportMetric(float64(relaunchSent), "files-sent-after-one-change")
}

// Where the CLI's output says the preview URL, the files uploaded and the
// files being sent.
var (
	previewRE  = regexp.MustCompile(`(?m)^(https://\S+)$`)
	uploadedRE = regexp.MustCompile(`uploaded (\d+) of (\d+) files`)
	sendingRE  = regexp.MustCompile(`uploading (\d+) files?`)
)

// launchedPreviewURL answers the preview URL a launch printed.
func launchedPreviewURL(b *testing.B, out string) string {
	b.Helper()
	m := previewRE.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no preview URL in:\n%s", out)
	}
	return m[1]
}

// pierCLI runs pier commands in process with env as their environment.
type pierCLI struct {
	b   *testing.B
	env map[string]string
}

// run runs pier with args, failing unless it exits 0, and answers its
// stdout and stderr.
func (p *pierCLI) run(args ...string) (string, string) {
	p.b.Helper()
	var out, errOut bytes.Buffer
	f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	f.Getenv = func(k string) string { return p.env[k] }
	if code := cli.Run(f, args); code != 0 {
		p.b.Fatalf("pier %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// waitServed waits until path at url answers 200 with want, failing 60 s
// after start.
func waitServed(b *testing.B, site *http.Client, url, path string, want []byte, start time.Time) {
	b.Helper()
	for {
		resp, err := site.Get(strings.TrimSuffix(url, "/") + path)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Equal(body, want) {
				return
			}
		}
		if time.Since(start) > 60*time.Second {
			b.Fatalf("%s%s not served after 60 s: %v", url, path, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// writeDigestSite writes n files of 1 KiB of fresh text under dir, in
// folders of 100, with an index.html among them.
func writeDigestSite(b testing.TB, dir string, n int) {
	raw := make([]byte, 1024)
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, "p", fmt.Sprintf("%02d", i/100%100), fmt.Sprintf("%04d.html", i))
		if i == 0 {
			p = filepath.Join(dir, "index.html")
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		text := []byte(rand.Text() + rand.Text())
		for j := range raw {
			raw[j] = text[j%len(text)]
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDigestDeployPhases splits the same two deploys into their calls,
// made with the SDK the way the CLI makes them (files hashed on two
// goroutines, content streamed four at a time): hash, find_missing_blobs,
// upload_blob for every missing file, upload_assets, launch_service, the
// task until it succeeds, and the first HTTPS answer with the new content.
// Metrics are medians, prefixed first- for the site new to the server and
// re- for the relaunch after a one-file change. Read it to see where
// first-s and one-file-ms of BenchmarkDigestDeploy go.
func BenchmarkDigestDeployPhases(b *testing.B) {
	dir := b.TempDir()
	key, project := adminSetup(b, dir)
	s := serveOn(b, dir)
	c, err := sdk.NewClient("http://"+s.Addr(), sdk.WithAPIKey(key))
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CARootPEM())
	site := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, s.HTTPSAddr())
		}}}
	phases := []string{"hash", "find", "upload", "create", "launch", "task", "https"}
	took := map[string][]time.Duration{}

	deploy := (&phasedDeploy{b: b, c: c, site: site, project: project, took: took}).deploy

	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "site")
		writeDigestSite(b, dir, digestFiles)
		syscall.Sync()
		b.StartTimer()
		deploy("first-", dir, fmt.Sprintf("phases%d", n), "index.html")
		if err := os.WriteFile(filepath.Join(dir, "p/00/0007.html"), []byte(fmt.Sprintf("<h1>changed %d</h1>", n)), 0o644); err != nil {
			b.Fatal(err)
		}
		deploy("re-", dir, fmt.Sprintf("phases%d", n), "p/00/0007.html")
	}
	b.StopTimer()
	for _, prefix := range []string{"first-", "re-"} {
		for _, p := range phases {
			b.ReportMetric(float64(percentile(took[prefix+p], 0.5).Microseconds())/1000, prefix+p+"-ms")
		}
	}
}

// phasedDeploy deploys a directory through the SDK, step by step, and
// records in took how long each phase took.
type phasedDeploy struct {
	b       *testing.B
	c       *sdk.Client
	site    *http.Client
	project string
	took    map[string][]time.Duration
}

// deploy hashes dir, finds and uploads what is missing, makes a bundle,
// launches it as name and waits until probe is served over HTTPS. Each
// phase's time is recorded under prefix and the phase's name.
func (d *phasedDeploy) deploy(prefix, dir, name, probe string) {
	ctx := context.Background()
	clock := time.Now()
	lap := func(phase string) {
		now := time.Now()
		d.took[prefix+phase] = append(d.took[prefix+phase], now.Sub(clock))
		clock = now
	}
	manifest, paths := hashDir(d.b, dir)
	lap("hash")
	m, err := d.c.FindMissingBlobs(ctx, sdk.FindMissingBlobsJSONRequestBody{ProjectId: d.project, Manifest: manifest})
	if err != nil {
		d.b.Fatal(err)
	}
	lap("find")
	putBatches(d.b, d.c, m.Data.Missing, paths)
	lap("upload")
	bundle, err := d.c.UploadAssets(ctx, &sdk.UploadAssetsParams{}, sdk.UploadAssetsJSONRequestBody{ProjectId: d.project, Manifest: &manifest})
	if err != nil {
		d.b.Fatal(err)
	}
	lap("create")
	l, err := d.c.LaunchService(ctx, d.project, &sdk.LaunchServiceParams{}, sdk.LaunchServiceJSONRequestBody{Name: name, Target: "edge", BundleId: &bundle.Data.BundleId})
	if err != nil {
		d.b.Fatal(err)
	}
	lap("launch")
	var url string
	for deadline := time.Now().Add(60 * time.Second); url == ""; time.Sleep(2 * time.Millisecond) {
		t, err := d.c.GetTask(ctx, l.Data.TaskId)
		if err != nil || time.Now().After(deadline) || t.Data.State == sdk.TaskHandleStateFailed {
			d.b.Fatalf("task: %v %+v", err, t)
		}
		if t.Data.State == sdk.TaskHandleStateSucceeded {
			url = *t.Data.PreviewUrl
		}
	}
	lap("task")
	want, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(probe)))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		resp, err := d.site.Get(strings.TrimSuffix(url, "/") + "/" + probe)
		if err == nil {
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Equal(got, want) {
				break
			}
		}
		if time.Now().After(deadline) {
			d.b.Fatalf("%s not served", probe)
		}
	}
	lap("https")
}

// putBatches uploads contents as the CLI does: up to 500 small files to a
// request (upload_blobs), four requests at a time.
func putBatches(b *testing.B, c *sdk.Client, shas []string, paths map[string]string) {
	ctx := context.Background()
	work := make(chan []string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				var contents []sdk.BlobSource
				for _, h := range batch {
					p := paths[h]
					fi, err := os.Stat(p)
					if err != nil {
						b.Error(err)
						return
					}
					contents = append(contents, sdk.BlobSource{SHA256: h, Size: fi.Size(), Open: func() (io.ReadCloser, error) { return os.Open(p) }})
				}
				if _, err := c.PutBlobs(ctx, contents); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	per := min(500, max(1, (len(shas)+3)/4))
	for len(shas) > 0 {
		n := min(per, len(shas))
		work <- shas[:n]
		shas = shas[n:]
	}
	close(work)
	wg.Wait()
}

// hashDir is the CLI's manifest of a directory, hashed on two goroutines.
func hashDir(b *testing.B, dir string) ([]sdk.ManifestFile, map[string]string) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	manifest := make([]sdk.ManifestFile, len(files))
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(files); i += 2 {
				data, err := os.ReadFile(files[i])
				if err != nil {
					b.Error(err)
					return
				}
				sum := sha256.Sum256(data)
				rel, _ := filepath.Rel(dir, files[i])
				manifest[i] = sdk.ManifestFile{Path: filepath.ToSlash(rel), Size: len(data), Sha256: hex.EncodeToString(sum[:])}
			}
		}()
	}
	wg.Wait()
	paths := make(map[string]string, len(files))
	for i, m := range manifest {
		paths[m.Sha256] = files[i]
	}
	return manifest, paths
}

// uploadedDigestSite serves Pier on a fresh data directory and uploads the
// content of a new site of digestFiles files, returning the client, the
// project and the site's manifest.
func uploadedDigestSite(b *testing.B) (*sdk.Client, string, []sdk.ManifestFile) {
	dir := b.TempDir()
	key, project := adminSetup(b, dir)
	s := serveOn(b, dir)
	c, err := sdk.NewClient("http://"+s.Addr(), sdk.WithAPIKey(key))
	if err != nil {
		b.Fatal(err)
	}
	siteDir := filepath.Join(b.TempDir(), "site")
	writeDigestSite(b, siteDir, digestFiles)
	manifest, paths := hashDir(b, siteDir)
	putBatches(b, c, slices.Collect(maps.Keys(paths)), paths)
	return c, project, manifest
}

// BenchmarkManifestBundle times upload_assets of a 20,000-file manifest
// whose content is all uploaded (what a one-file relaunch with the CLI's
// digest cache spends most of its time on), each operation a new bundle
// (one path differs). Profile it with -cpuprofile.
func BenchmarkManifestBundle(b *testing.B) {
	c, project, manifest := uploadedDigestSite(b)
	ctx := context.Background()
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		manifest[0].Path = fmt.Sprintf("renamed-%d.html", n)
		if _, err := c.UploadAssets(ctx, &sdk.UploadAssetsParams{}, sdk.UploadAssetsJSONRequestBody{ProjectId: project, Manifest: &manifest}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBundleFromBase times upload_assets of a bundle made from a
// 20,000-file bundle with one file changed (what a one-file relaunch with
// the CLI's digest cache sends), each operation a new bundle.
func BenchmarkBundleFromBase(b *testing.B) {
	c, project, manifest := uploadedDigestSite(b)
	ctx := context.Background()
	base, err := c.UploadAssets(ctx, &sdk.UploadAssetsParams{}, sdk.UploadAssetsJSONRequestBody{ProjectId: project, Manifest: &manifest})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		// One file's content becomes another's: a new bundle each time.
		change := manifest[(n+1)%len(manifest)]
		change.Path = manifest[n%len(manifest)].Path
		changes, removed := []sdk.ManifestFile{change}, []string{}
		if _, err := c.UploadAssets(ctx, &sdk.UploadAssetsParams{}, sdk.UploadAssetsJSONRequestBody{ProjectId: project, BaseBundleId: &base.Data.BundleId, Changes: &changes, Removed: &removed}); err != nil {
			b.Fatal(err)
		}
	}
}
