package service

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"sort"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

// intakeGroup is how many entries a manifest intake holds before it looks
// their contents up, in one query.
const intakeGroup = 4096

// Marks of a content hash in ManifestIntake.contents besides its stored
// size: not stored, or not looked up yet.
const (
	contentMissing = -1
	contentPending = -2
)

// ManifestIntake takes a manifest's entries one at a time, in the order a
// request sends them, for FindMissing or Upload, and holds what they need
// of them rather than the manifest: each entry is checked as it comes
// (safe and distinct paths, hashes, sizes), its content looked up a group
// at a time, and for an upload written into pages as it comes when the
// entries come in path order (else gathered and sorted at the end). What
// it keeps of every entry is a 16-byte digest of its path, and of every
// distinct content a digest and a size.
type ManifestIntake struct {
	ctx      context.Context
	st       store.Bundles
	orgID    string
	losses   int64
	known    *knownBlobs
	seeds    [2]maphash.Seed
	n        int
	total    int64
	problems []Problem
	paths    map[[2]uint64]struct{}
	contents map[[2]uint64]int64
	// pending are the entries since the last look-up; fresh the first
	// entry of each content they name that was not looked up before.
	pending, fresh []site.File
	missing        []string
	missingBytes   int64
	distinct       int
	mismatch       error
	err            error
	// For an upload: the pages written so far, the last path, the path
	// the entry being taken was compared with the last by, and every
	// entry once one came out of path order.
	w             *pageWriter
	last, reached string
	gathered      []site.File
}

// NewManifest starts taking a manifest's entries, for upload_assets
// (upload: its pages are written as they come) or find_missing_blobs.
// A failure to start is answered when the manifest is used.
func (s *Bundles) NewManifest(ctx context.Context, p *auth.Principal, upload bool) *ManifestIntake {
	m := &ManifestIntake{ctx: ctx, st: s.store.Bundles(), orgID: p.OrgID, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		paths: map[[2]uint64]struct{}{}, contents: map[[2]uint64]int64{}, known: s.known}
	// Contents are looked up as entries come: the bundle is recorded as
	// checked at the loss count read before, and what is known of them
	// (knownBlobs) is as of it.
	losses, err := m.st.Losses(ctx)
	if err != nil {
		m.err = apierr.Internal(err)
	}
	m.losses = losses
	if upload {
		m.w = newPageWriter(ctx, m.st, s.Now())
	}
	return m
}

func (m *ManifestIntake) digest(s string) [2]uint64 {
	return [2]uint64{maphash.String(m.seeds[0], s), maphash.String(m.seeds[1], s)}
}

// Add takes the next entry. Past MaxManifestFiles entries, or after an
// entry is refused, entries are only counted and checked.
func (m *ManifestIntake) Add(e ManifestEntry) {
	i := m.n
	m.n++
	if m.n > MaxManifestFiles || m.err != nil {
		return
	}
	m.reached = ""
	f, problem := entryFile(fmt.Sprintf("body.manifest.%d", i), e, m.dup)
	if problem != nil {
		if m.w != nil && m.gathered == nil {
			// Paths are compared by digest from here, this one's too
			// when it was compared at all.
			m.gather(false)
			if m.reached != "" {
				m.paths[m.digest(m.reached)] = struct{}{}
			}
		}
		m.problems = append(m.problems, *problem)
		return
	}
	m.total += f.Size
	if len(m.problems) > 0 {
		return
	}
	if k := m.digest(f.SHA256); !m.seenContent(k) {
		m.contents[k] = contentPending
		m.fresh = append(m.fresh, f)
	}
	m.pending = append(m.pending, f)
	if m.w != nil {
		m.page(f)
	}
	if len(m.pending) >= intakeGroup {
		m.lookUp()
	}
}

// dup reports whether an entry's path came before. While an upload's
// entries come in path order, each is compared with the last; from the
// first that does not (or the first refused), every path's digest is
// kept, those before read back from the pages written.
func (m *ManifestIntake) dup(p string) bool {
	if m.w != nil && m.gathered == nil {
		if m.last == "" || p > m.last {
			m.last, m.reached = p, p
			return false
		}
		if m.gather(true); m.err != nil {
			return false
		}
	}
	k := m.digest(p)
	_, dup := m.paths[k]
	m.paths[k] = struct{}{}
	return dup
}

func (m *ManifestIntake) seenContent(k [2]uint64) bool {
	_, ok := m.contents[k]
	return ok
}

// page writes an upload's entry into pages, or gathers it once entries
// came out of path order.
func (m *ManifestIntake) page(f site.File) {
	if m.gathered != nil {
		m.gathered = append(m.gathered, f)
		return
	}
	if err := m.w.add(f); err != nil {
		m.err = apierr.Internal(err)
	}
}

// gather reads back the pages an upload wrote so far and keeps their
// paths' digests, once an entry came out of path order (and then the
// entries, to be sorted) or was refused (then only the digests: nothing
// more is written).
func (m *ManifestIntake) gather(keep bool) {
	refs, err := m.w.finish()
	if err != nil {
		m.err = apierr.Internal(err)
		return
	}
	m.gathered = []site.File{}
	if keep {
		m.gathered = make([]site.File, 0, m.w.files+1)
	}
	for _, r := range refs {
		entries, err := readPage(m.ctx, m.st, r.SHA256)
		if err != nil {
			m.err = apierr.Internal(err)
			return
		}
		for _, f := range entries {
			m.paths[m.digest(f.Path)] = struct{}{}
		}
		if keep {
			m.gathered = append(m.gathered, entries...)
		}
	}
}

// lookUp looks up the contents of the pending entries: which the
// organisation has not uploaded, and whether each stored one has the size
// its entries say.
func (m *ManifestIntake) lookUp() {
	if len(m.pending) == 0 || m.err != nil || len(m.problems) > 0 {
		return
	}
	sizes := make(map[string]int64, len(m.fresh))
	if shas := m.known.lookUp(m.orgID, m.losses, m.fresh, sizes); len(shas) > 0 {
		found, err := m.st.OrgBlobSizes(m.ctx, m.orgID, shas)
		if err != nil {
			m.err = apierr.Internal(err)
			return
		}
		m.known.add(m.orgID, m.losses, found)
		maps.Copy(sizes, found)
	}
	m.distinct += len(m.fresh)
	for _, f := range m.fresh {
		size, ok := sizes[f.SHA256]
		if !ok {
			size = contentMissing
			m.missing = append(m.missing, f.SHA256)
			m.missingBytes += f.Size
		}
		m.contents[m.digest(f.SHA256)] = size
	}
	for _, f := range m.pending {
		if size := m.contents[m.digest(f.SHA256)]; size >= 0 && size != f.Size && m.mismatch == nil {
			m.mismatch = sizeMismatch("body.manifest", f, size)
		}
	}
	m.pending, m.fresh = m.pending[:0], m.fresh[:0]
}

// checked ends the intake and refuses a manifest that is not sound on its
// own, in the order the refusals are checked: too many files, none,
// entries refused, too many bytes.
func (m *ManifestIntake) checked() error {
	m.lookUp()
	switch {
	case m.err != nil:
		return m.err
	case m.n > MaxManifestFiles:
		return tooManyFiles("body.manifest", m.n)
	case m.n == 0:
		return apierr.New("input:invalid", "the manifest lists no file").WithField("body.manifest", "empty")
	case len(m.problems) > 0:
		return fieldsRefused(m.problems)
	case m.total > MaxManifestBytes:
		return tooManyBytes("body.manifest", m.total)
	}
	return nil
}

// pages ends an upload's intake: its pages, the entries in path order.
func (m *ManifestIntake) pages() ([]store.PageRef, error) {
	if m.gathered == nil {
		return m.w.finish()
	}
	sort.Slice(m.gathered, func(i, j int) bool { return m.gathered[i].Path < m.gathered[j].Path })
	return writePages(m.ctx, m.st, m.w.now, m.gathered)
}

// entryFile checks one manifest entry (its path, distinct by dup, its
// hash and size) and returns it as a file, or the problem with it.
func entryFile(field string, e ManifestEntry, dup func(path string) bool) (site.File, *Problem) {
	if err := safePath(e.Path); err != nil {
		return site.File{}, &Problem{Field: field + ".path", Problem: err.Error()}
	}
	if dup(e.Path) {
		return site.File{}, &Problem{Field: field + ".path", Problem: "duplicate path " + e.Path}
	}
	if !isSHA256(e.SHA256) {
		return site.File{}, &Problem{Field: field + ".sha256", Problem: "not 64 lowercase hex digits"}
	}
	if e.Size < 0 || e.Size > MaxFileBytes {
		return site.File{}, &Problem{Field: field + ".size", Problem: fmt.Sprintf("not between 0 and %d bytes", MaxFileBytes)}
	}
	ctype := e.ContentType
	if ctype == "" {
		ctype = site.ContentType(e.Path)
	}
	return site.File{Path: e.Path, SHA256: e.SHA256, Size: int64(e.Size), ContentType: ctype}, nil
}

// sizeMismatch refuses an entry whose stored content has another size.
func sizeMismatch(field string, f site.File, size int64) *apierr.Error {
	return apierr.Newf("input:invalid", "%s: the manifest says %d bytes, but the content with that SHA-256 has %d", f.Path, f.Size, size).
		WithField(field, fmt.Sprintf("%s: size %d, content %d bytes", f.Path, f.Size, size))
}
