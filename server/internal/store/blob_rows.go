package store

import (
	"context"
	"database/sql"
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
// the rows already there and returns the keys of those it wrote.
func insertRows(table, n int) string {
	if v, ok := insertRowsQueries.Load([2]int{table, n}); ok {
		return v.(string)
	}
	head, tail := `INSERT INTO blobs (sha256, size, data, created_at) VALUES `, ` ON CONFLICT (sha256) DO NOTHING RETURNING sha256, ''`
	if table == orgBlobsTable {
		head, tail = `INSERT INTO org_blobs (org_id, sha256, size, created_at) VALUES `, ` ON CONFLICT (org_id, sha256) DO NOTHING RETURNING sha256, org_id`
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
// INSERT a table each, inside db's transaction, and sets each write's had: the
// organisation had the content when neither its record nor the content
// was written now. A content or record named twice is written by its
// first write; the later ones had it, as if they had come one after the
// other.
func applyBlobWrites(ctx context.Context, db Bundles, chunks []blobChunk) error {
	for _, c := range chunks {
		qs := c.queries()
		newBlobs, err := db.insertReturning(ctx, qs[0], c.blobArgs)
		if err != nil {
			return err
		}
		newRecords, err := db.insertReturning(ctx, qs[1], c.orgArgs)
		if err != nil {
			return err
		}
		for _, w := range c.ws {
			k := [2]string{w.sha, w.orgID}
			w.had = !newBlobs[[2]string{w.sha, ""}] && !newRecords[k]
			// Later writes of the same content or record find it written.
			delete(newBlobs, [2]string{w.sha, ""})
			delete(newRecords, k)
		}
	}
	return nil
}

// insertReturning runs a multi-row INSERT … RETURNING of two key columns,
// prepared when it was (see execPrepared), and returns the keys written.
func (c conn) insertReturning(ctx context.Context, query string, args []any) (map[[2]string]bool, error) {
	var rows *sql.Rows
	var err error
	if v, ok := c.store.stmts.Load(query); ok && c.tx != nil {
		rows, err = c.tx.tx.StmtContext(ctx, v.(*sql.Stmt)).QueryContext(ctx, args...)
	} else {
		rows, err = c.ex.QueryContext(ctx, c.q(query), args...)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[[2]string]bool, len(args)/4)
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, rows.Err()
}
