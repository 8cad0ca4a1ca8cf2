package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// PageRef is one page of a bundle's manifest as the bundle lists it: the
// SHA-256 of the page's JSON, its first path, and the files and bytes it
// holds, so that a bundle's size and the page holding a path are known
// without reading any page.
type PageRef struct {
	SHA256 string `json:"sha256"`
	First  string `json:"first"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
}

// Page is one page's content: a JSON array of manifest entries, stored
// under its SHA-256.
type Page struct {
	SHA256  string
	Entries []byte
}

// PutPages stores pages once each, in one transaction; a page stored
// already is left as it is.
func (db Bundles) PutPages(ctx context.Context, pages []Page, now time.Time) error {
	if len(pages) == 0 {
		return nil
	}
	// In hash order: writers sharing pages take their rows' locks in the
	// same order, and PostgreSQL has no deadlock to break between them.
	sorted := slices.SortedFunc(slices.Values(pages), func(a, b Page) int { return strings.Compare(a.SHA256, b.SHA256) })
	return db.atomically(ctx, func(tx *Tx) error {
		q := tx.Bundles().q(`INSERT INTO manifest_pages (sha256, entries, created_at) VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING`)
		for _, p := range sorted {
			if _, err := tx.Bundles().ex.ExecContext(ctx, q, p.SHA256, string(p.Entries), now.UnixMicro()); err != nil {
				return err
			}
		}
		return nil
	})
}

// Pages reads pages by their SHA-256, in one query; every one must be
// stored.
func (db Bundles) Pages(ctx context.Context, shas []string) (map[string][]byte, error) {
	list, err := json.Marshal(slices.Sorted(slices.Values(shas)))
	if err != nil {
		return nil, err
	}
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT p.sha256, p.entries FROM `+db.jsonList()+` CROSS JOIN manifest_pages p WHERE p.sha256 = j.value`), string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string][]byte, len(shas))
	for rows.Next() {
		var sha string
		var entries []byte
		if err := rows.Scan(&sha, &entries); err != nil {
			return nil, err
		}
		out[sha] = entries
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, sha := range shas {
		if _, ok := out[sha]; !ok {
			return nil, fmt.Errorf("store: manifest page %s is not stored", sha)
		}
	}
	return out, nil
}

// Root reads a bundle of the organisation with its page list but without
// its manifest: what deriving a bundle from it, launching it or naming its
// digest needs. A bundle stored before pages has its whole manifest in
// Manifest and no Pages.
func (db Bundles) Root(ctx context.Context, orgID, id string) (Bundle, error) {
	return db.by(ctx, `org_id = ? AND id = ?`, orgID, id)
}

// manifestOf joins a paged bundle's pages into its whole manifest, one
// JSON array, as Manifest has always held it.
func (db Bundles) manifestOf(ctx context.Context, refs []PageRef) (string, error) {
	shas := make([]string, len(refs))
	for i, r := range refs {
		shas[i] = r.SHA256
	}
	pages, err := db.Pages(ctx, shas)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for _, r := range refs {
		inner := bytes.TrimSpace(pages[r.SHA256])
		if len(inner) < 2 || inner[0] != '[' || inner[len(inner)-1] != ']' {
			return "", errors.New("store: manifest page " + r.SHA256 + " is not a JSON array")
		}
		inner = inner[1 : len(inner)-1]
		if len(inner) == 0 {
			continue
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		buf.Write(inner)
	}
	buf.WriteByte(']')
	return buf.String(), nil
}
