package store

import (
	"context"
	"strings"
	"sync"
)

// blobRowsPerInsert bounds the rows of one multi-row INSERT: four
// parameters a row keeps a statement far below SQLite's limit on
// variables (32,766 in the builds this store uses) and PostgreSQL's
// (65,535), and a whole group commit (maxGroup) fits in one statement a
// table.
const blobRowsPerInsert = maxGroup

// blobChunk is one multi-row INSERT into blobs and one into org_blobs:
// the writes of a run of hash-sorted blobWrites, each content once and
// each organisation's record once.
type blobChunk struct {
	ws       []*blobWrite
	blobArgs []any // sha256, size, data, created_at for each distinct hash
	orgArgs  []any // org_id, sha256, size, created_at for each distinct record
}

// blobChunks splits writes sorted by hash into chunks of at most
// blobRowsPerInsert writes.
func blobChunks(sorted []*blobWrite) []blobChunk {
	var out []blobChunk
	for len(sorted) > 0 {
		n := min(len(sorted), blobRowsPerInsert)
		c := blobChunk{ws: sorted[:n]}
		seenBlob := make(map[string]bool, n)
		seenRecord := make(map[[2]string]bool, n)
		for _, w := range c.ws {
			if !seenBlob[w.sha] {
				seenBlob[w.sha] = true
				c.blobArgs = append(c.blobArgs, w.sha, w.size, w.body, w.at)
			}
			if k := [2]string{w.orgID, w.sha}; !seenRecord[k] {
				seenRecord[k] = true
				c.orgArgs = append(c.orgArgs, w.orgID, w.sha, w.size, w.at)
			}
		}
		out = append(out, c)
		sorted = sorted[n:]
	}
	return out
}

// insertRowsQueries caches the text of the multi-row INSERTs by table
// and row count.
var insertRowsQueries sync.Map // [2]int{table, rows} → string

const (
	blobsTable = iota
	orgBlobsTable
)

// insertRows is the INSERT of n rows into blobs or org_blobs that skips
// the rows already there.
func insertRows(table, n int) string {
	if v, ok := insertRowsQueries.Load([2]int{table, n}); ok {
		return v.(string)
	}
	head, tail := `INSERT INTO blobs (sha256, size, data, created_at) VALUES `, ` ON CONFLICT (sha256) DO NOTHING`
	if table == orgBlobsTable {
		head, tail = `INSERT INTO org_blobs (org_id, sha256, size, created_at) VALUES `, ` ON CONFLICT (org_id, sha256) DO NOTHING`
	}
	var b strings.Builder
	b.Grow(len(head) + len(tail) + 14*n)
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?)")
	}
	b.WriteString(tail)
	q, _ := insertRowsQueries.LoadOrStore([2]int{table, n}, b.String())
	return q.(string)
}

// queries are the chunk's two statements.
func (c blobChunk) queries() [2]string {
	return [2]string{insertRows(blobsTable, len(c.blobArgs)/4), insertRows(orgBlobsTable, len(c.orgArgs)/4)}
}

// prepareBlobChunks prepares the chunks' statements before the
// transaction that runs them (see execPrepared).
func (s *Store) prepareBlobChunks(ctx context.Context, chunks []blobChunk) error {
	for _, c := range chunks {
		for _, q := range c.queries() {
			if _, err := s.prepared(ctx, q); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyBlobWrites writes the chunks (of writes sorted by hash), one
// INSERT a table each, inside db's transaction, and sets each write's
// had: the organisation had the content when neither its record nor the
// content was written now. A content or record named twice is written by
// its first write; the later ones had it, as if they had come one after
// the other.
//
// When every row of a chunk is new (a first upload, the usual case),
// which rows were written needs no asking. Otherwise the chunk is undone
// to a savepoint and written a content at a time, each INSERT's count
// telling its write's answer. (RETURNING would tell which rows were
// written, but SQLite builds a table of them: it doubled the b-tree
// inserts of a first upload of 100,000 files.)
func applyBlobWrites(ctx context.Context, db Bundles, chunks []blobChunk) error {
	for _, c := range chunks {
		allNew, err := db.insertChunk(ctx, c)
		if err != nil {
			return err
		}
		if !allNew {
			for _, w := range c.ws {
				if err := w.apply(ctx, db); err != nil {
					return err
				}
			}
			continue
		}
		seen := make(map[[2]string]bool, len(c.ws))
		for _, w := range c.ws {
			k := [2]string{w.orgID, w.sha}
			w.had = seen[k]
			seen[k] = true
		}
	}
	return nil
}

// insertChunk writes a chunk's rows and keeps them when all were new;
// otherwise it undoes them and reports false.
func (db Bundles) insertChunk(ctx context.Context, c blobChunk) (bool, error) {
	if _, err := db.ex.ExecContext(ctx, `SAVEPOINT blob_chunk`); err != nil {
		return false, err
	}
	allNew := true
	for i, q := range c.queries() {
		args := c.blobArgs
		if i == 1 {
			args = c.orgArgs
		}
		res, err := db.execPrepared(ctx, q, args...)
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(args)/4) {
			allNew = false
			break
		}
	}
	end := `RELEASE SAVEPOINT blob_chunk`
	if !allNew {
		end = `ROLLBACK TO SAVEPOINT blob_chunk`
	}
	_, err := db.ex.ExecContext(ctx, end)
	return allNew, err
}

// apply writes one content and its record alone, when some of a chunk's
// rows were there: the INSERTs of one row each.
func (w *blobWrite) apply(ctx context.Context, db Bundles) error {
	stored, err := db.execPrepared(ctx, insertRows(blobsTable, 1), w.sha, w.size, w.body, w.at)
	if err != nil {
		return err
	}
	recorded, err := db.execPrepared(ctx, insertRows(orgBlobsTable, 1), w.orgID, w.sha, w.size, w.at)
	if err != nil {
		return err
	}
	// The organisation had it when its record was there and so was the
	// content (content lost from storage counts as not had).
	newBlob, _ := stored.RowsAffected()
	newRecord, _ := recorded.RowsAffected()
	w.had = newBlob == 0 && newRecord == 0
	return nil
}
