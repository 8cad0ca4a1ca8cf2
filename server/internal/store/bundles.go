package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

func scanBundleSummary(row interface{ Scan(...any) error }) (Bundle, error) {
	var b Bundle
	var created int64
	err := row.Scan(&b.ID, &b.OrgID, &b.SHA256, &b.FileCount, &b.TotalBytes, &created)
	b.CreatedAt = time.UnixMicro(created).UTC()
	return b, err
}

// Bundle is an uploaded set of files. Manifest is its whole manifest as
// JSON (Get fills it; Root leaves it "[]" for a paged bundle); Pages are
// its manifest's pages in path order, nil for a bundle stored before them.
type Bundle struct {
	ID, OrgID, SHA256 string
	FileCount         int
	TotalBytes        int64
	Manifest          string
	Pages             []PageRef
	CreatedAt         time.Time
	// CheckedLosses is the blob loss count (Losses) at which every
	// content the manifest names was last known stored, when Checked;
	// Put records a bundle without Checked as never checked (-1).
	CheckedLosses int64
	Checked       bool
	// BaseID is the bundle this one was made from, if any.
	BaseID string
}

// ListBundles lists an organisation's bundles without their manifests.
func (db Bundles) List(ctx context.Context, orgID string, f Filter) ([]Bundle, error) {
	return collect(ctx, db.ex, scanBundleSummary, db.q(`SELECT id, org_id, sha256, file_count, total_bytes, created_at FROM bundles
		WHERE org_id = ? AND `+afterCond("id")+` ORDER BY created_at DESC, id LIMIT ?`), append(append([]any{orgID}, f.afterArgs()...), f.limit())...)
}

// PutBlob stores content under its SHA-256 once; storing it again is a
// no-op.
func (db Bundles) PutBlob(ctx context.Context, sha string, data []byte, now time.Time) error {
	body := nonNil(data)
	if o := db.store.objects; o != nil && len(data) > 0 {
		// The body goes to the object store first; the row, which says
		// the blob exists, comes after, so a row never names a missing body.
		if err := o.Put(ctx, sha, data); err != nil {
			return err
		}
		body = []byte{}
	}
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO blobs (sha256, size, data, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING`),
		sha, len(data), body, now.UnixMicro())
	return err
}

// nonNil is data, or an empty body for nil: the column is NOT NULL, and
// an empty file's content is still content.
func nonNil(data []byte) []byte {
	if data == nil {
		return []byte{}
	}
	return data
}

// Blob reads content by its SHA-256.
func (db Bundles) Blob(ctx context.Context, sha string) ([]byte, error) {
	var b []byte
	var size int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT data, size FROM blobs WHERE sha256 = ?`), sha).Scan(&b, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err == nil && int64(len(b)) != size {
		// Kept in the object store.
		if db.store.objects == nil {
			return nil, errors.New("store: blob " + sha + " is in an object store this server is not configured with")
		}
		return db.store.objects.Get(ctx, sha)
	}
	return b, err
}

// PutOrgBlob stores content as PutBlob does and records that the
// organisation uploaded it, in one transaction. It reports whether the
// organisation had uploaded that content before and it was still stored;
// whether another organisation has it is never told, and the content is
// written either way, so the call takes the same path.
func (db Bundles) PutOrgBlob(ctx context.Context, orgID, sha string, data []byte, now time.Time) (bool, error) {
	body := nonNil(data)
	if o := db.store.objects; o != nil && len(data) > 0 {
		if err := o.Put(ctx, sha, data); err != nil {
			return false, err
		}
		body = []byte{}
	}
	w := &blobWrite{orgID: orgID, sha: sha, size: len(data), body: body, at: now.UnixMicro()}
	err := db.putWrites(ctx, []*blobWrite{w})
	return w.had, err
}

// BlobContent is one content to store, by its SHA-256.
type BlobContent struct {
	SHA256 string
	Data   []byte
}

// PutOrgBlobs stores contents as PutOrgBlob does, in as few transactions
// as there are groups of maxGroup, and reports for each whether the
// organisation had it. On SQLite they join the writes arriving meanwhile.
func (db Bundles) PutOrgBlobs(ctx context.Context, orgID string, contents []BlobContent, now time.Time) ([]bool, error) {
	if len(contents) == 0 {
		return nil, nil
	}
	ws := make([]*blobWrite, len(contents))
	for i, c := range contents {
		body := nonNil(c.Data)
		if o := db.store.objects; o != nil && len(c.Data) > 0 {
			if err := o.Put(ctx, c.SHA256, c.Data); err != nil {
				return nil, err
			}
			body = []byte{}
		}
		ws[i] = &blobWrite{orgID: orgID, sha: c.SHA256, size: len(c.Data), body: body, at: now.UnixMicro()}
	}
	err := db.putWrites(ctx, ws)
	had := make([]bool, len(ws))
	for i, w := range ws {
		had[i] = w.had
	}
	return had, err
}

// putWrites writes ws: in the caller's transaction, in one of its own on
// PostgreSQL, or with the writes arriving meanwhile on SQLite.
func (db Bundles) putWrites(ctx context.Context, ws []*blobWrite) error {
	if db.tx == nil && db.store.engine == SQLite {
		return db.store.blobWrites.write(ctx, db.store, ws...)
	}
	// In hash order: batches sharing contents then take their rows'
	// locks in the same order, and PostgreSQL has no deadlock to break
	// between them.
	chunks := blobChunks(sortedByHash(ws))
	if db.tx == nil {
		if err := db.store.prepareBlobChunks(ctx, chunks); err != nil {
			return err
		}
	}
	return db.atomically(ctx, func(tx *Tx) error { return applyBlobWrites(ctx, tx.Bundles(), chunks) })
}

func sortedByHash(ws []*blobWrite) []*blobWrite {
	sorted := slices.Clone(ws)
	slices.SortStableFunc(sorted, func(a, b *blobWrite) int { return strings.Compare(a.sha, b.sha) })
	return sorted
}

// blobWrite is one content written for one organisation.
type blobWrite struct {
	orgID, sha string
	size       int
	body       []byte
	at         int64
	had        bool
	err        error
	done       chan struct{}
}

// groupCommit commits concurrent blob writes together on SQLite. SQLite
// has one writer at a time, and a digest upload sends many small files in
// parallel: one transaction each would queue them on the write lock, one
// commit after another, where a loser sleeps for milliseconds before
// trying again. Instead the first writer to arrive commits what is
// waiting, then what arrived meanwhile, until nothing is left; each
// caller returns once its own write is committed.
type groupCommit struct {
	mu      sync.Mutex
	pending []*blobWrite
	leading bool
}

// maxGroup bounds one transaction's writes: 256 small files is some
// 300 KiB of pages, and four times fewer COMMITs than 64 when uploads
// queue up behind each other.
const maxGroup = 256

func (g *groupCommit) write(ctx context.Context, s *Store, ws ...*blobWrite) error {
	for _, w := range ws {
		w.done = make(chan struct{})
	}
	wait := func() error {
		var errs []error
		for _, w := range ws {
			select {
			case <-w.done:
				errs = append(errs, w.err)
			case <-ctx.Done():
				// The write still happens; only the wait ends.
				return ctx.Err()
			}
		}
		return errors.Join(errs...)
	}
	g.mu.Lock()
	g.pending = append(g.pending, ws...)
	if g.leading {
		g.mu.Unlock()
		return wait()
	}
	g.leading = true
	for len(g.pending) > 0 {
		batch := g.pending[:min(len(g.pending), maxGroup)]
		g.pending = g.pending[len(batch):]
		g.mu.Unlock()
		s.commitGroup(context.WithoutCancel(ctx), batch)
		g.mu.Lock()
	}
	g.pending = nil
	g.leading = false
	g.mu.Unlock()
	var errs []error
	for _, w := range ws {
		<-w.done
		errs = append(errs, w.err)
	}
	return errors.Join(errs...)
}

// commitGroup writes a batch in one transaction, one multi-row INSERT a
// table; if that fails, each write alone, so that one bad write fails
// only its own caller.
func (s *Store) commitGroup(ctx context.Context, batch []*blobWrite) {
	finish := func(w *blobWrite, err error) {
		w.err = err
		close(w.done)
	}
	// In hash order: the contents' indexes are keyed by hash, and the
	// inserts then walk their pages in order.
	chunks := blobChunks(sortedByHash(batch))
	err := s.prepareBlobChunks(ctx, chunks)
	if err == nil {
		err = s.InTx(ctx, func(tx *Tx) error { return applyBlobWrites(ctx, tx.Bundles(), chunks) })
	}
	if err == nil || len(batch) == 1 {
		for _, w := range batch {
			finish(w, err)
		}
		return
	}
	for _, w := range batch {
		one := blobChunks([]*blobWrite{w})
		finish(w, s.InTx(ctx, func(tx *Tx) error { return applyBlobWrites(ctx, tx.Bundles(), one) }))
	}
}

// jsonList is a FROM item that unpacks one parameter, a JSON array of
// strings, into rows with a column named value: one statement for any
// number of hashes, without a placeholder per hash.
func (db Bundles) jsonList() string {
	if db.store.engine == Postgres {
		return `jsonb_array_elements_text(CAST(CAST(? AS text) AS jsonb)) AS j(value)`
	}
	return `json_each(?) AS j`
}

// OrgBlobSizes returns, for the hashes among shas that the organisation
// has uploaded and that are still stored, their sizes: the digest
// upload's answer to "what is missing", in one query. Hashes another
// organisation uploaded do not count.
func (db Bundles) OrgBlobSizes(ctx context.Context, orgID string, shas []string) (map[string]int64, error) {
	// In key order, the lookups walk the indexes' pages in order.
	list, err := json.Marshal(slices.Sorted(slices.Values(shas)))
	if err != nil {
		return nil, err
	}
	// The size is the organisation's record's, and the content's
	// existence is read from the blobs' key alone: no blob row is read.
	// CROSS JOIN keeps the list as the outer loop on SQLite, whose planner
	// cannot size a json_each and may otherwise scan org_blobs once per
	// hash.
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT o.sha256, o.size FROM `+db.jsonList()+` CROSS JOIN org_blobs o
		WHERE o.org_id = ? AND o.sha256 = j.value AND EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = j.value)`), string(list), orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]int64, len(shas))
	for rows.Next() {
		var sha string
		var size int64
		if err := rows.Scan(&sha, &size); err != nil {
			return nil, err
		}
		out[sha] = size
	}
	return out, rows.Err()
}

// MissingBlobs returns the hashes among shas whose content is not stored,
// in one query, in the order given.
func (db Bundles) MissingBlobs(ctx context.Context, shas []string) ([]string, error) {
	list, err := json.Marshal(slices.Sorted(slices.Values(shas)))
	if err != nil {
		return nil, err
	}
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT j.value FROM `+db.jsonList()+`
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = j.value)`), string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	missing := map[string]bool{}
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			return nil, err
		}
		missing[sha] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range shas {
		if missing[s] {
			out = append(out, s)
			delete(missing, s)
		}
	}
	return out, nil
}

// BundleMissingBlobs returns the hashes a bundle's manifest names whose
// content is no longer stored (an object store that lost objects, a row
// deleted by hand), sorted, in one query whatever the bundle's size.
func (db Bundles) BundleMissingBlobs(ctx context.Context, orgID, bundleID string) ([]string, error) {
	// A paged bundle's entries are in its pages; an older one's in its
	// manifest column ("[]" for a paged one): both are read.
	query := `SELECT sha FROM (
		SELECT json_extract(f.value, '$.sha256') AS sha FROM bundles bd, json_each(bd.manifest) AS f
		WHERE bd.org_id = ? AND bd.id = ?
		UNION
		SELECT json_extract(f.value, '$.sha256') AS sha FROM bundles bd, json_each(COALESCE(bd.pages, '[]')) AS r
		JOIN manifest_pages p ON p.sha256 = json_extract(r.value, '$.sha256'), json_each(p.entries) AS f
		WHERE bd.org_id = ? AND bd.id = ?) AS s
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = s.sha)
		ORDER BY sha`
	if db.store.engine == Postgres {
		query = `SELECT sha FROM (
		SELECT f.value->>'sha256' AS sha FROM bundles bd, jsonb_array_elements(CAST(bd.manifest AS jsonb)) AS f(value)
		WHERE bd.org_id = ? AND bd.id = ?
		UNION
		SELECT f.value->>'sha256' AS sha FROM bundles bd CROSS JOIN jsonb_array_elements(CAST(COALESCE(bd.pages, '[]') AS jsonb)) AS r(value)
		JOIN manifest_pages p ON p.sha256 = r.value->>'sha256' CROSS JOIN jsonb_array_elements(CAST(p.entries AS jsonb)) AS f(value)
		WHERE bd.org_id = ? AND bd.id = ?) AS s
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = s.sha)
		ORDER BY sha`
	}
	rows, err := db.ex.QueryContext(ctx, db.q(query), orgID, bundleID, orgID, bundleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			return nil, err
		}
		out = append(out, sha)
	}
	return out, rows.Err()
}

// HasBlob reports whether content is stored.
func (db Bundles) HasBlob(ctx context.Context, sha string) (bool, error) {
	var n int
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM blobs WHERE sha256 = ?`), sha).Scan(&n)
	return n > 0, err
}

// Losses is how many times content was deleted from blobs, ever (a
// trigger counts them; the server itself deletes none). Read it before
// checking that content is stored: a check that found everything holds
// for as long as the count stays what it was.
func (db Bundles) Losses(ctx context.Context) (int64, error) {
	var n int64
	// Prepared: a digest upload reads it once per group of contents.
	err := db.queryRowPrepared(ctx, `SELECT n FROM blob_losses WHERE id = 1`).Scan(&n)
	return n, err
}

// MarkChecked records that every content of a bundle was stored at the
// loss count losses (read before the check), unless it was recorded at a
// later one.
func (db Bundles) MarkChecked(ctx context.Context, orgID, id string, losses int64) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE bundles SET checked_losses = ? WHERE org_id = ? AND id = ? AND checked_losses < ?`), losses, orgID, id, losses)
	return err
}

// PutBundle stores a bundle, or returns the organisation's existing bundle
// with the same content (marked checked at b.CheckedLosses if that is
// later than its own).
func (db Bundles) Put(ctx context.Context, b Bundle) (Bundle, bool, error) {
	var base any
	if b.BaseID != "" {
		base = b.BaseID
	}
	if !b.Checked {
		b.CheckedLosses = -1
	}
	var pages any
	manifest := b.Manifest
	if b.Pages != nil {
		j, err := json.Marshal(b.Pages)
		if err != nil {
			return b, false, err
		}
		pages, manifest = string(j), "[]"
	}
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO bundles (id, org_id, sha256, file_count, total_bytes, manifest, created_at, checked_losses, base_id, pages) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, sha256) DO NOTHING`), b.ID, b.OrgID, b.SHA256, b.FileCount, b.TotalBytes, manifest, b.CreatedAt.UnixMicro(), b.CheckedLosses, base, pages)
	if err != nil {
		return b, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return b, true, nil
	}
	existing, err := db.by(ctx, `org_id = ? AND sha256 = ?`, b.OrgID, b.SHA256)
	if err == nil && existing.CheckedLosses < b.CheckedLosses {
		if err := db.MarkChecked(ctx, existing.OrgID, existing.ID, b.CheckedLosses); err != nil {
			return existing, false, err
		}
		existing.CheckedLosses, existing.Checked = b.CheckedLosses, true
	}
	return existing, false, err
}

// GetBundle reads a bundle of the organisation with its whole manifest,
// joined from its pages when it has them.
func (db Bundles) Get(ctx context.Context, orgID, id string) (Bundle, error) {
	b, err := db.by(ctx, `org_id = ? AND id = ?`, orgID, id)
	if err == nil && b.Pages != nil {
		b.Manifest, err = db.manifestOf(ctx, b.Pages)
	}
	return b, err
}

func (db Bundles) by(ctx context.Context, where string, args ...any) (Bundle, error) {
	var b Bundle
	var created int64
	var base, pages sql.NullString
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT id, org_id, sha256, file_count, total_bytes, manifest, created_at, checked_losses, base_id, pages FROM bundles WHERE `+where), args...).
		Scan(&b.ID, &b.OrgID, &b.SHA256, &b.FileCount, &b.TotalBytes, &b.Manifest, &created, &b.CheckedLosses, &base, &pages)
	if errors.Is(err, sql.ErrNoRows) {
		return b, ErrNotFound
	}
	if err == nil && pages.Valid {
		b.Pages = []PageRef{}
		err = json.Unmarshal([]byte(pages.String), &b.Pages)
	}
	b.CreatedAt = time.UnixMicro(created).UTC()
	b.BaseID = base.String
	b.Checked = b.CheckedLosses >= 0
	return b, err
}
