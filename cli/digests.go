package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"
)

// digestCache is what the last digest upload of a directory to one
// project on one server left behind: each file's SHA-256 by its path, size
// and modification time, so that the next upload hashes only the files
// that changed; and, since it is written only once the server made the
// bundle, the contents the project's organisation then had, so that the
// next upload sends the new ones without asking first. Were any of them
// lost since, the server refuses the bundle naming them, and the upload
// asks (find_missing_blobs) as if there were no cache.
type digestCache struct {
	// Written is when the cache was written, in Unix nanoseconds. A file
	// modified less than racyWindow before it may have changed again
	// within the file system's timestamp granularity: it is hashed again.
	Written int64                 `json:"written"`
	Files   map[string]cachedFile `json:"files"`
	// Interrupted is set by an upload that failed before making its
	// bundle: some of what it sent may have arrived unacknowledged, so the
	// next run asks the server, sending only what is still missing.
	Interrupted bool `json:"interrupted,omitempty"`
}

type cachedFile struct {
	Size    int64  `json:"size"`
	ModTime int64  `json:"modTime"`
	SHA256  string `json:"sha256"`
}

const racyWindow = 2 * time.Second

// digestCachePath names the cache of dir's uploads to project on baseURL:
// under $PIER_CACHE_DIR, else the user's cache directory; "" when there is
// none or PIER_CACHE_DIR is "off".
func digestCachePath(f *Factory, baseURL, project, dir string) string {
	root := f.getenv("PIER_CACHE_DIR")
	if root == "off" {
		return ""
	}
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		root = filepath.Join(base, "pier")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(baseURL + "\x00" + project + "\x00" + abs))
	return filepath.Join(root, "digests", hex.EncodeToString(sum[:16])+".json")
}

// loadDigestCache reads a cache; a missing or unreadable one is empty.
func loadDigestCache(path string) *digestCache {
	c := &digestCache{Files: map[string]cachedFile{}}
	if path == "" {
		return c
	}
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, c) != nil || c.Files == nil {
		return &digestCache{Files: map[string]cachedFile{}}
	}
	return c
}

// lookup returns a file's hash when the cache knows it for this size and
// modification time, and the modification time is not racy.
func (c *digestCache) lookup(rel string, size int64, mod time.Time) (string, bool) {
	e, ok := c.Files[rel]
	if !ok || e.Size != size || e.ModTime != mod.UnixNano() || mod.UnixNano() > c.Written-int64(racyWindow) {
		return "", false
	}
	return e.SHA256, true
}

// had reports the contents the organisation had when the cache was
// written; none after an interruption.
func (c *digestCache) had() map[string]bool {
	if c.Interrupted {
		return nil
	}
	out := make(map[string]bool, len(c.Files))
	for _, e := range c.Files {
		out[e.SHA256] = true
	}
	return out
}

// remember makes the cache what a bundle of files leaves behind.
func (c *digestCache) remember(files []siteFile) {
	c.Written, c.Interrupted = time.Now().UnixNano(), false
	c.Files = make(map[string]cachedFile, len(files))
	for _, sf := range files {
		c.Files[sf.entry.Path] = cachedFile{Size: int64(sf.entry.Size), ModTime: sf.modTime.UnixNano(), SHA256: sf.entry.Sha256}
	}
}

// save writes the cache atomically; failing to is not the upload's
// failure.
func (c *digestCache) save(path string) {
	if path == "" {
		return
	}
	data, err := json.Marshal(c)
	if err != nil || os.MkdirAll(filepath.Dir(path), 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".digests-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}
