package store

import (
	"context"
	"errors"
	"time"
)

// Forms are a blob's compressed forms, by Content-Encoding; nil when that
// encoding does not shrink the content enough to be worth sending.
type Forms struct {
	Gzip, Brotli []byte
}

// BlobWithForms is content with its compressed forms. Made is false when
// no forms were made for it yet.
type BlobWithForms struct {
	Data  []byte
	Forms Forms
	Made  bool
}

// BlobWithForms reads content and its compressed forms by its SHA-256, in
// one query.
func (db Bundles) BlobWithForms(ctx context.Context, sha string) (BlobWithForms, error) {
	var out BlobWithForms
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT '' AS encoding, size, data FROM blobs WHERE sha256 = ?
		UNION ALL SELECT encoding, size, data FROM blob_forms WHERE sha256 = ?`), sha, sha)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var enc string
		var size int64
		var data []byte
		if err := rows.Scan(&enc, &size, &data); err != nil {
			return out, err
		}
		if int64(len(data)) != size {
			// Kept in the object store.
			if db.store.objects == nil {
				return out, errors.New("store: blob " + sha + " is in an object store this server is not configured with")
			}
			if enc == "" {
				data, err = db.store.objects.Get(ctx, sha)
			} else {
				data, err = db.store.objects.GetForm(ctx, sha, enc)
				if err == nil && int64(len(data)) != size {
					err = errors.New("store: the " + enc + " form of blob " + sha + " came back with another size")
				}
			}
			if err != nil {
				return out, err
			}
		}
		switch enc {
		case "":
			out.Data, found = data, true
		case "gzip":
			out.Forms.Gzip = data
		case "br":
			out.Forms.Brotli = data
		case "identity":
			out.Made = true
		}
	}
	if err := rows.Err(); err != nil {
		return out, err
	}
	if !found {
		return BlobWithForms{}, ErrNotFound
	}
	return out, nil
}

// PutBlobForms keeps a blob's compressed forms, and the record that they
// were made. Making them again is a no-op: forms are deterministic, and
// the first kept wins.
func (db Bundles) PutBlobForms(ctx context.Context, sha string, f Forms, now time.Time) error {
	forms := []struct {
		enc  string
		data []byte
	}{{"gzip", f.Gzip}, {"br", f.Brotli}}
	bodies := make([][]byte, len(forms))
	for i, form := range forms {
		bodies[i] = form.data
		if o := db.store.objects; o != nil && len(form.data) > 0 {
			// As for blobs: the body first, the row that names it after.
			if err := o.PutForm(ctx, sha, form.enc, form.data); err != nil {
				return err
			}
			bodies[i] = []byte{}
		}
	}
	return db.atomically(ctx, func(tx *Tx) error {
		q := tx.Bundles().q(`INSERT INTO blob_forms (sha256, encoding, size, data, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (sha256, encoding) DO NOTHING`)
		for i, form := range forms {
			if form.data == nil {
				continue
			}
			if _, err := tx.Bundles().ex.ExecContext(ctx, q, sha, form.enc, len(form.data), bodies[i], now.UnixMicro()); err != nil {
				return err
			}
		}
		_, err := tx.Bundles().ex.ExecContext(ctx, q, sha, "identity", 0, []byte{}, now.UnixMicro())
		return err
	})
}
