package service

import (
	"encoding/hex"
	"sync"

	"github.com/pierhq/pier/server/internal/site"
)

// knownBlobs remembers, in this process, contents an organisation is
// known to have uploaded and still stored, with their sizes, so that a
// deploy's upload_assets need not look up again what its
// find_missing_blobs looked up and its upload_blobs stored: 16 % of a
// 100,000-file first deploy's server CPU was the same 100,000 look-ups
// made twice.
//
// It is sound because what it remembers can be undone only by losing
// content: an organisation's record of a content is never deleted while
// the organisation is, and every content deleted from the blobs counts
// one more loss in the database (blob_losses, on every replica). Each
// entry is remembered as of the loss count read before its look-up or
// write, and is believed only by a reader that read the same count before
// its own: a loss since, here or on another replica, forgets everything.
// A miss is only a look-up in the database, as before.
type knownBlobs struct {
	mu     sync.Mutex
	losses int64
	orgs   map[string]map[[32]byte]int64
	n      int
}

// maxKnownBlobs bounds what is remembered (about 60 bytes an entry): a
// site of the largest manifest, or many smaller ones.
const maxKnownBlobs = MaxManifestFiles

func newKnownBlobs() *knownBlobs { return &knownBlobs{orgs: map[string]map[[32]byte]int64{}} }

// at is the organisation's entries as of losses, after forgetting
// everything remembered as of fewer; nil when losses is older than what
// is remembered. The caller holds mu.
func (k *knownBlobs) at(orgID string, losses int64, create bool) map[[32]byte]int64 {
	if losses < k.losses {
		return nil
	}
	if losses > k.losses {
		k.losses, k.orgs, k.n = losses, map[string]map[[32]byte]int64{}, 0
	}
	org := k.orgs[orgID]
	if org == nil && create {
		org = map[[32]byte]int64{}
		k.orgs[orgID] = org
	}
	return org
}

func key(sha string) ([32]byte, bool) {
	var b [32]byte
	_, err := hex.Decode(b[:], []byte(sha))
	return b, err == nil && len(sha) == 64
}

// lookUp puts into sizes the known contents among files and returns the
// hashes of the others.
func (k *knownBlobs) lookUp(orgID string, losses int64, files []site.File, sizes map[string]int64) []string {
	rest := make([]string, 0, len(files))
	if k == nil {
		for _, f := range files {
			rest = append(rest, f.SHA256)
		}
		return rest
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	org := k.at(orgID, losses, false)
	for _, f := range files {
		b, ok := key(f.SHA256)
		size, known := org[b]
		if ok && known {
			sizes[f.SHA256] = size
			continue
		}
		rest = append(rest, f.SHA256)
	}
	return rest
}

// add remembers contents the organisation has, as of losses read before
// they were looked up or written.
func (k *knownBlobs) add(orgID string, losses int64, sizes map[string]int64) {
	if k == nil || len(sizes) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n+len(sizes) > maxKnownBlobs {
		k.orgs, k.n = map[string]map[[32]byte]int64{}, 0
	}
	org := k.at(orgID, losses, true)
	if org == nil {
		return
	}
	for sha, size := range sizes {
		if b, ok := key(sha); ok && k.n < maxKnownBlobs {
			if _, there := org[b]; !there {
				k.n++
			}
			org[b] = size
		}
	}
}
