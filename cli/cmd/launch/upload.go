package launch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

// uploadParallelism is how many requests a digest upload makes at once.
const uploadParallelism = 4

// siteFile is one file of a directory to upload: where it is on disk and
// its manifest entry.
type siteFile struct {
	abs   string
	stat  fileStat
	entry sdk.ManifestFile
	// cached: the digest cache holds this very record (path, size, times,
	// hash), so what changed since it was written need not look it up.
	cached bool
	// rec is the cache's record of the file, when the walk took it from
	// its folder's recorded listing (not looked up by path).
	rec *cachedFile
	// data is a small file's content as it was hashed, kept for the
	// upload (keepFileBytes); nil when the upload reads the file again.
	data []byte
}

// A file of at most keepFileBytes is kept in memory from its hash to its
// upload, up to keepBytes in all: a first deploy of many small files
// reads each once, not twice, and sends the bytes it hashed.
const (
	keepFileBytes = 16 << 10
	keepBytes     = 128 << 20
)

// readSite walks a directory into manifest entries, hashing every file as
// it streams by, so no file is held in memory; a file the cache knows by
// its size, times and inode is not read at all. Hidden files and folders
// are left out, except .well-known. The files come in filepath.WalkDir's
// order.
func readSite(dir string, cache *digestCache) ([]siteFile, error) {
	if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
		return readSiteSerial(dir, cache)
	}
	files, err := walkSite(dir, cache)
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%s holds no files to upload", dir)
	}
	if err != nil {
		return nil, err
	}
	return files, nil
}

// readSiteSerial is readSite for a root that is not a directory, as
// filepath.WalkDir sees it.
func readSiteSerial(dir string, cache *digestCache) ([]siteFile, error) {
	var files []siteFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		files = append(files, siteFile{abs: path, entry: sdk.ManifestFile{Path: filepath.ToSlash(rel)}})
		return nil
	})
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%s holds no files to upload", dir)
	}
	if err != nil {
		return nil, err
	}
	st := openStatter(dir)
	defer st.close()
	errs := make([]error, len(files))
	for i := range files {
		errs[i] = statFile(cache, &files[i], func(sf *siteFile) (fileStat, error) {
			return st.stat(filepath.FromSlash(sf.entry.Path))
		})
	}
	return files, errors.Join(errs...)
}

// statFile fills in a file's times and hash: from the cache when it knows
// the file as it is, else by reading it. The times are read before the
// content: a change made while hashing leaves times the next run does not
// match.
func statFile(cache *digestCache, sf *siteFile, lstat func(*siteFile) (fileStat, error)) error {
	stat, err := lstat(sf)
	if err != nil {
		return err
	}
	sf.stat = stat
	var sha string
	var ok, exact bool
	if sf.rec != nil {
		if !stat.regular {
			return nil // the walk lists its folder again
		}
		sha, ok, exact = cache.match(*sf.rec, true, stat)
	} else {
		sha, ok, exact = cache.lookup(sf.entry.Path, stat)
	}
	if ok {
		sf.entry.Sha256, sf.entry.Size, sf.cached = sha, int(stat.size), exact
		return nil
	}
	keep := int64(-1)
	if stat.size <= keepFileBytes && cache.kept.Add(stat.size) <= keepBytes {
		keep = stat.size
	}
	sum, size, data, err := hashFile(sf.abs, keep)
	sf.entry.Sha256, sf.entry.Size, sf.data = sum, int(size), data
	return err
}

// lstatPath is os.Lstat as the cache compares it.
func lstatPath(path string) (fileStat, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return fileStat{}, err
	}
	st := fileStat{size: info.Size(), mod: info.ModTime(), regular: info.Mode().IsRegular()}
	st.ino, st.ctime = fileIdentity(info)
	return st, nil
}

// hashFile hashes a file; keep, when not negative, is the size it was
// statted at, and returns its bytes too.
func hashFile(path string, keep int64) (string, int64, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, nil, err
	}
	defer f.Close()
	h := sha256.New()
	var head int64
	if keep >= 0 {
		data, whole, err := readSized(f, keep)
		switch {
		case err != nil:
			return "", 0, nil, err
		case whole:
			sum := sha256.Sum256(data)
			return hex.EncodeToString(sum[:]), int64(len(data)), data, nil
		}
		// It grew past what may be kept: hashed as it streams, and read
		// again to be sent.
		h.Write(data)
		head = int64(len(data))
	}
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	// Not io.Copy: a file's WriteTo would take a buffer of its own, 32
	// KiB of garbage a file.
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf)
	if err != nil {
		return "", 0, nil, err
	}
	return hex.EncodeToString(h.Sum(nil)), head + n, nil, nil
}

var hashBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// uploadStats says what a digest upload sent.
type uploadStats struct {
	files, uploaded int
	uploadedBytes   int64
	// watched: the watcher told what changed, and only that was read.
	watched bool
}

// uploadDir uploads a directory as a bundle by digest: it hashes the files
// locally, asks the server which contents it lacks for the organisation,
// streams only those (uploadParallelism at a time), then creates the
// bundle from the manifest. A run after an interruption sends only what
// is still missing. After an upload of the same directory to the same
// project, the digest cache stands in for hashing the unchanged files and
// for asking: the contents not in the last bundle are sent, and the
// bundle is created at once.
func uploadDir(ctx context.Context, f *cmdutil.Factory, p *cmdutil.Progress, dir, project string) (*sdk.BundleEnvelope, uploadStats, error) {
	var st uploadStats
	// An upload's garbage is a few short-lived allocations a file:
	// collecting it a third as often saves about a tenth of the CLI's CPU
	// on a relaunch of 20,000 files (50 MiB resident).
	defer debug.SetGCPercent(debug.SetGCPercent(300))
	cachePath := digestCachePath(f, f.BaseURL(), project, dir)
	var watcher *siteWatch
	if wb := readWatchedBase(cachePath); cachePath != "" {
		watch, files := "", 0
		if wb != nil {
			watch, files = wb.head.Watch, wb.head.files
		}
		watcher = openSiteWatch(f, p, dir, watch, files)
		if watcher.incremental() && wb.usable() {
			b, st, done, err := uploadWatched(ctx, f, p, watcher, wb, dir, project)
			if done {
				return b, st, err
			}
			watcher.ans = nil // the walk below, from the same token
		}
	}
	cache := loadDigestCache(cachePath)
	if watcher != nil {
		cache.watchNext = watcher.next
	}
	walked := time.Now()
	files, err := watcher.readSite(dir, cache)
	if err != nil {
		return nil, st, cmdutil.UsageErrorf("", "cannot read the folder to upload: %v", err)
	}
	// A watcher started now is asked for its token while the upload
	// runs; the cache records it only if nothing changed since the walk.
	watched := watcher.after(dir, files, cache, walked)
	st.files = len(files)
	c, err := f.Client()
	if err != nil {
		return nil, st, err
	}
	ix := &siteIndex{files: files}
	// Content can go missing between the check and the bundle (an
	// object store losing it): the refusal names it, and a second round
	// sends it.
	base := cache.Bundle
	for round := 0; ; round++ {
		todo, todoBytes, err := missingFiles(ctx, c, project, dir, ix, cache, round == 0 && cache.usable())
		if err != nil {
			return nil, st, err
		}
		n, bytes, err := uploadFiles(ctx, c, p, todo, todoBytes)
		st.uploaded += n
		st.uploadedBytes += bytes
		if err != nil {
			cache.Interrupted = true
			cache.save(cachePath)
			return nil, st, err
		}
		b, err := createBundle(ctx, c, project, &base, cache, ix)
		var e *sdk.Error
		if round < 2 && errors.As(err, &e) && e.BlockedBy == "conflict:blobs_missing" {
			continue
		}
		if err == nil {
			watched()
			cache.remember(files, b.Data.BundleId)
			cache.save(cachePath)
		}
		return b, st, err
	}
}

// siteIndex is a site's files with what the whole-manifest path needs of
// them, made only when it is taken: a relaunch from the cache needs
// neither.
type siteIndex struct {
	files    []siteFile
	once     sync.Once
	manifest []sdk.ManifestFile
	bySHA    map[string]siteFile // the first file of each content
}

func (ix *siteIndex) build() {
	ix.once.Do(func() {
		ix.manifest = make([]sdk.ManifestFile, len(ix.files))
		ix.bySHA = make(map[string]siteFile, len(ix.files))
		for i, sf := range ix.files {
			ix.manifest[i] = sf.entry
			if _, ok := ix.bySHA[sf.entry.Sha256]; !ok {
				ix.bySHA[sf.entry.Sha256] = sf
			}
		}
		// In path order (bytes, as the server's pages), the server writes
		// the manifest's pages as it arrives and keeps no path set.
		slices.SortFunc(ix.manifest, func(a, b sdk.ManifestFile) int { return strings.Compare(a.Path, b.Path) })
	})
}

// missingFiles are the files whose contents to send: those not in the last
// bundle, when the cache stands in for asking, else those the server says
// it lacks. It returns them and the bytes they hold.
func missingFiles(ctx context.Context, c *sdk.Client, project, dir string, ix *siteIndex, cache *digestCache, fromCache bool) ([]siteFile, int64, error) {
	if fromCache {
		// What the last bundle held is taken as still there.
		todo, todoBytes := cache.unsent(ix.files)
		return todo, todoBytes, nil
	}
	ix.build()
	m, err := c.FindMissingBlobs(ctx, sdk.FindMissingBlobsJSONRequestBody{ProjectId: project, Manifest: ix.manifest})
	if err != nil {
		return nil, 0, err
	}
	todo := make([]siteFile, 0, len(m.Data.Missing))
	for _, sha := range m.Data.Missing {
		sf, ok := ix.bySHA[sha]
		if !ok {
			return nil, 0, fmt.Errorf("the server asked for content %s, which no file in %s has", sha, dir)
		}
		todo = append(todo, sf)
	}
	return todo, int64(m.Data.MissingBytes), nil
}

// createBundle creates the bundle: from the last bundle and what changed
// since, when there is one the server still holds, else from the whole
// manifest. A last bundle gone clears base.
func createBundle(ctx context.Context, c *sdk.Client, project string, base *string, cache *digestCache, ix *siteIndex) (*sdk.BundleEnvelope, error) {
	var b *sdk.BundleEnvelope
	var err error
	if *base != "" {
		// What differs from the last bundle, which the server
		// holds: a one-file change sends one entry, not the site.
		changes, removed := cache.changesSince(ix.files)
		b, err = c.UploadAssets(ctx, &sdk.UploadAssetsParams{}, sdk.UploadAssetsJSONRequestBody{ProjectId: project, BaseBundleId: base, Changes: &changes, Removed: &removed})
		var e *sdk.Error
		if errors.As(err, &e) && e.BlockedBy == "not_found:resource" {
			// The last bundle is gone (another server, a restore):
			// the whole manifest, as if there were no cache.
			*base = ""
		}
	}
	if *base == "" {
		ix.build()
		b, err = c.UploadAssets(ctx, &sdk.UploadAssetsParams{}, sdk.UploadAssetsJSONRequestBody{ProjectId: project, Manifest: &ix.manifest})
	}
	return b, err
}

// Small files go several to a request (upload_blobs), a batch at most
// batchFiles files and batchBytes bytes, so that a site of thousands of
// small files is not thousands of requests; a file over batchFileBytes
// goes alone (upload_blob).
const (
	batchFiles     = 500
	batchBytes     = 4 << 20
	batchFileBytes = 256 << 10
)

// uploadBatches groups files into what each request sends: the small
// ones in batches, spread over at least uploadParallelism requests when
// there are enough of them, and each large one alone.
func uploadBatches(files []siteFile) [][]siteFile {
	var small []siteFile
	var out [][]siteFile
	for _, sf := range files {
		if sf.entry.Size > batchFileBytes {
			out = append(out, []siteFile{sf})
		} else {
			small = append(small, sf)
		}
	}
	// In hash order: the server's index of contents is keyed by hash, and
	// a first upload's contents then fill it from one end to the other, a
	// few pages each commit, where in the site's order each commit
	// touched a page a content.
	slices.SortFunc(small, func(a, b siteFile) int { return strings.Compare(a.entry.Sha256, b.entry.Sha256) })
	per := min(batchFiles, max(1, (len(small)+uploadParallelism-1)/uploadParallelism))
	var cur []siteFile
	var curBytes int64
	for _, sf := range small {
		if len(cur) > 0 && (len(cur) >= per || curBytes+int64(sf.entry.Size) > batchBytes) {
			out = append(out, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, sf)
		curBytes += int64(sf.entry.Size)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// uploadFiles sends files, small ones in batches (upload_blobs) and large
// ones alone (upload_blob), uploadParallelism requests at a time, and
// stops at the first failure. It reports what it sent.
func uploadFiles(ctx context.Context, c *sdk.Client, p *cmdutil.Progress, files []siteFile, total int64) (int, int64, error) {
	if len(files) == 0 {
		return 0, 0, nil
	}
	if p != nil && !p.TTY() {
		p.Step(fmt.Sprintf("uploading %s (%s)", plural(len(files), "file"), humanBytes(total)))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	batches := uploadBatches(files)
	work := make(chan []siteFile)
	type result struct {
		files int
		size  int64
		err   error
	}
	results := make(chan result)
	var wg sync.WaitGroup
	for range min(uploadParallelism, len(batches)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				var size int64
				for _, sf := range batch {
					size += int64(sf.entry.Size)
				}
				var err error
				if len(batch) == 1 {
					err = uploadFile(ctx, c, batch[0])
				} else {
					err = uploadBatch(ctx, c, batch)
				}
				results <- result{len(batch), size, err}
			}
		}()
	}
	go func() {
		defer close(work)
		for _, b := range batches {
			select {
			case work <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	var done int
	var sent int64
	var first error
	last, lastLine := time.Time{}, time.Now()
	for r := range results {
		if r.err != nil {
			if first == nil {
				first = r.err
				cancel(r.err)
			}
			continue
		}
		done += r.files
		sent += r.size
		switch {
		case p == nil:
		case p.TTY() && (time.Since(last) > 100*time.Millisecond || done == len(files)):
			last = time.Now()
			p.Step(fmt.Sprintf("uploading %d/%d files, %s of %s", done, len(files), humanBytes(sent), humanBytes(total)))
		case !p.TTY() && done < len(files) && time.Since(lastLine) >= uploadLineEvery:
			// Off a terminal (a CI log), a line now and then, so that a
			// long upload is seen going on.
			lastLine = time.Now()
			p.Step(fmt.Sprintf("uploading %d/%d files, %s of %s", done, len(files), humanBytes(sent), humanBytes(total)))
		}
	}
	return done, sent, first
}

// uploadLineEvery is how often an upload off a terminal prints where it
// is (a variable for tests).
var uploadLineEvery = 10 * time.Second

// uploadBatch streams several files in one request. A file read again
// (not kept since its hash) that changed since it was hashed fails the
// batch (its SHA-256 or its length no longer matches); the files before
// it are kept by the server.
func uploadBatch(ctx context.Context, c *sdk.Client, batch []siteFile) error {
	contents := make([]sdk.BlobSource, len(batch))
	for i, sf := range batch {
		contents[i] = sdk.BlobSource{SHA256: sf.entry.Sha256, Size: int64(sf.entry.Size), Open: sf.open}
	}
	_, err := c.PutBlobs(ctx, contents)
	var e *sdk.Error
	if errors.As(err, &e) && e.BlockedBy == "input:invalid" {
		return fmt.Errorf("a file of %s changed while it was uploaded; run the command again: %w", filepath.Dir(batch[0].abs), err)
	}
	if err != nil && ctx.Err() == nil && !errors.As(err, &e) {
		return fmt.Errorf("uploading %s and %s: %w", batch[0].abs, plural(len(batch)-1, "other file"), err)
	}
	return err
}

// uploadFile streams one file. A file that changed since it was hashed is
// refused by the server (its SHA-256 no longer matches) or by the
// transport (its length no longer matches): either way, run again.
func uploadFile(ctx context.Context, c *sdk.Client, sf siteFile) error {
	_, err := c.PutBlob(ctx, sf.entry.Sha256, int64(sf.entry.Size), sf.open)
	var e *sdk.Error
	if errors.As(err, &e) && e.BlockedBy == "input:invalid" {
		return fmt.Errorf("%s changed while it was uploaded; run the command again: %w", sf.abs, err)
	}
	if err != nil && ctx.Err() == nil && !errors.As(err, &e) {
		return fmt.Errorf("uploading %s: %w", sf.abs, err)
	}
	return err
}

// readSized reads a file to its end into a buffer of the size it was
// statted at, and one byte more to find its end in two reads. A file
// that grew since is read on only while it is within keepFileBytes;
// whole is false when it is larger, and data then its first bytes.
func readSized(f *os.File, size int64) (data []byte, whole bool, err error) {
	buf := make([]byte, size+1)
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err == io.EOF {
			return buf[:n:n], true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	// It grew since: the rest as it comes, while the whole stays a file
	// that may be kept.
	more, err := io.ReadAll(io.LimitReader(f, max(0, keepFileBytes+1-int64(len(buf)))))
	buf = append(buf, more...)
	return buf, err == nil && len(buf) <= keepFileBytes, err
}

// open opens the file's content: the bytes hashed when they were kept,
// else the file.
func (sf siteFile) open() (io.ReadCloser, error) {
	if sf.data != nil {
		return io.NopCloser(bytes.NewReader(sf.data)), nil
	}
	return os.Open(sf.abs)
}

// humanBytes writes a size the way people read it.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
