package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// MailDomain is a domain whose mail is set up, with its DKIM key.
type MailDomain struct {
	Domain, OrgID, Selector string
	PrivateKey, PublicKey   string // PEM and the DNS p= value
	State, TaskID           string // setting_up, ready, removed
	CreatedAt, UpdatedAt    time.Time
}

// Inbox holds an address's messages, within a byte limit.
type Inbox struct {
	ID, OrgID, Address    string
	BytesUsed, BytesLimit int64
	Messages              int
	CreatedAt             time.Time
}

// EmailAddress delivers into an inbox; a catch-all takes the domain's mail
// that no address of its own takes.
type EmailAddress struct {
	ID, OrgID, Domain, Address, InboxID string
	CatchAll                            bool
	CreatedAt                           time.Time
	DeletedAt                           *time.Time
}

// Message is a received message; bodies and headers as parsed, JSON where
// structured.
type Message struct {
	ID, InboxID, OrgID  string
	MailFrom, Rcpt      string // Rcpt: JSON list
	FromHeader, Subject string
	ReceivedAt          time.Time
	Size                int64
	Headers, Text, HTML string
	Attachments, Auth   string // JSON
	RawSHA256           string
}

// Registrant is a proposed (or confirmed) registrant contact.
type Registrant struct {
	Domain, OrgID, Contact, TokenHash, TaskID, State string
	CreatedAt                                        time.Time
	ConfirmedAt                                      *time.Time
}

// PutDomain records a domain's mail set-up (or its key again, unchanged,
// when the set-up is retried).
func (db Mail) PutDomain(ctx context.Context, d MailDomain) (MailDomain, error) {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO mail_domains (domain, org_id, selector, private_key, public_key, state, task_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (domain) DO NOTHING`),
		d.Domain, d.OrgID, d.Selector, d.PrivateKey, d.PublicKey, d.State, d.TaskID, d.CreatedAt.UnixMicro(), d.UpdatedAt.UnixMicro())
	if err != nil {
		return d, err
	}
	return db.Domain(ctx, d.Domain)
}

// ClaimDomain takes a domain's mail set-up for a new setup task, in
// state setting_up: it inserts the row, or takes over one that was
// removed, whose setup task failed, or that belongs to another
// organisation (the domain changed hands), keeping the key when the
// organisation is the same. It reports false, changing nothing, when the
// organisation already has mail set up or being set up there. The domain
// is the key, so of concurrent claims one wins.
func (db Mail) ClaimDomain(ctx context.Context, d MailDomain) (bool, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO mail_domains (domain, org_id, selector, private_key, public_key, state, task_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, 'setting_up', ?, ?, ?)
		ON CONFLICT (domain) DO UPDATE SET
			private_key = CASE WHEN mail_domains.org_id = excluded.org_id THEN mail_domains.private_key ELSE excluded.private_key END,
			public_key = CASE WHEN mail_domains.org_id = excluded.org_id THEN mail_domains.public_key ELSE excluded.public_key END,
			selector = CASE WHEN mail_domains.org_id = excluded.org_id THEN mail_domains.selector ELSE excluded.selector END,
			org_id = excluded.org_id, state = 'setting_up', task_id = excluded.task_id, updated_at = excluded.updated_at
		WHERE mail_domains.state = 'removed' OR mail_domains.org_id <> excluded.org_id
			OR EXISTS (SELECT 1 FROM tasks WHERE tasks.id = mail_domains.task_id AND tasks.state IN ('failed', 'canceled'))`),
		d.Domain, d.OrgID, d.Selector, d.PrivateKey, d.PublicKey, d.TaskID, d.CreatedAt.UnixMicro(), d.UpdatedAt.UnixMicro())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Domain reads a domain's mail set-up.
func (db Mail) Domain(ctx context.Context, domain string) (MailDomain, error) {
	var d MailDomain
	var c, u int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT domain, org_id, selector, private_key, public_key, state, task_id, created_at, updated_at FROM mail_domains WHERE domain = ?`), domain).
		Scan(&d.Domain, &d.OrgID, &d.Selector, &d.PrivateKey, &d.PublicKey, &d.State, &d.TaskID, &c, &u)
	if errors.Is(err, sql.ErrNoRows) {
		return d, ErrNotFound
	}
	d.CreatedAt, d.UpdatedAt = time.UnixMicro(c).UTC(), time.UnixMicro(u).UTC()
	return d, err
}

// SetDomainState moves a domain's mail set-up to state, for this task.
func (db Mail) SetDomainState(ctx context.Context, domain, state, taskID string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE mail_domains SET state = ?, task_id = ?, updated_at = ? WHERE domain = ?`), state, taskID, now.UnixMicro(), domain)
	return err
}

// CreateAddress stores an address with a new inbox; ErrConflict when the
// address (or the domain's catch-all) is taken.
func (db Mail) CreateAddress(ctx context.Context, a EmailAddress, bytesLimit int64) error {
	return db.atomically(ctx, func(tx *Tx) error {
		if _, err := tx.tx.ExecContext(ctx, db.q(`INSERT INTO inboxes (id, org_id, address, bytes_used, bytes_limit, created_at) VALUES (?, ?, ?, 0, ?, ?)`),
			a.InboxID, a.OrgID, a.Address, bytesLimit, a.CreatedAt.UnixMicro()); err != nil {
			return err
		}
		// No key violation: a refusal inside a caller's transaction
		// leaves it usable on PostgreSQL as on SQLite, without the inbox.
		err := insertedOne(tx.tx.ExecContext(ctx, db.q(`INSERT INTO email_addresses (id, org_id, domain, address, catch_all, inbox_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`),
			a.ID, a.OrgID, a.Domain, a.Address, boolInt(a.CatchAll), a.InboxID, a.CreatedAt.UnixMicro()))
		if errors.Is(err, ErrConflict) {
			if _, err := tx.tx.ExecContext(ctx, db.q(`DELETE FROM inboxes WHERE id = ?`), a.InboxID); err != nil {
				return err
			}
		}
		return err
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

const addressCols = `id, org_id, domain, address, catch_all, inbox_id, created_at, deleted_at`

func scanAddress(row interface{ Scan(...any) error }) (EmailAddress, error) {
	var a EmailAddress
	var catchAll int
	var c int64
	var d sql.NullInt64
	err := row.Scan(&a.ID, &a.OrgID, &a.Domain, &a.Address, &catchAll, &a.InboxID, &c, &d)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNotFound
	}
	a.CatchAll, a.CreatedAt = catchAll == 1, time.UnixMicro(c).UTC()
	if d.Valid {
		t := time.UnixMicro(d.Int64).UTC()
		a.DeletedAt = &t
	}
	return a, err
}

// Addresses lists a page of an organisation's live addresses, oldest
// first, after f.After.
func (db Mail) Addresses(ctx context.Context, orgID string, f Filter) ([]EmailAddress, error) {
	return collect(ctx, db.ex, scanAddress, db.q(`SELECT `+addressCols+` FROM email_addresses
		WHERE org_id = ? AND deleted_at IS NULL AND `+afterCondOldest("id")+` ORDER BY created_at, id LIMIT ?`),
		append(append([]any{orgID}, f.afterArgs()...), f.limit())...)
}

// Address reads an address of the organisation.
func (db Mail) Address(ctx context.Context, orgID, id string) (EmailAddress, error) {
	return scanAddress(db.ex.QueryRowContext(ctx, db.q(`SELECT `+addressCols+` FROM email_addresses WHERE id = ? AND org_id = ?`), id, orgID))
}

// DeleteAddress marks a live address deleted; ErrNotFound otherwise.
func (db Mail) DeleteAddress(ctx context.Context, orgID, id string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE email_addresses SET deleted_at = ? WHERE id = ? AND org_id = ? AND deleted_at IS NULL`), now.UnixMicro(), id, orgID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Route finds the live address that takes mail for rcpt: its own, or its
// domain's catch-all.
func (db Mail) Route(ctx context.Context, rcpt, domain string) (EmailAddress, error) {
	return scanAddress(db.ex.QueryRowContext(ctx, db.q(`SELECT `+addressCols+` FROM email_addresses
		WHERE deleted_at IS NULL AND (address = ? OR (catch_all = 1 AND domain = ?)) ORDER BY catch_all LIMIT 1`), rcpt, domain))
}

const inboxCols = `i.id, i.org_id, i.address, i.bytes_used, i.bytes_limit, i.created_at, (SELECT COUNT(*) FROM messages m WHERE m.inbox_id = i.id)`

func scanInbox(row interface{ Scan(...any) error }) (Inbox, error) {
	var i Inbox
	var c int64
	err := row.Scan(&i.ID, &i.OrgID, &i.Address, &i.BytesUsed, &i.BytesLimit, &c, &i.Messages)
	if errors.Is(err, sql.ErrNoRows) {
		return i, ErrNotFound
	}
	i.CreatedAt = time.UnixMicro(c).UTC()
	return i, err
}

// Inboxes lists a page of an organisation's inboxes, oldest first, after
// f.After.
func (db Mail) Inboxes(ctx context.Context, orgID string, f Filter) ([]Inbox, error) {
	return collect(ctx, db.ex, scanInbox, db.q(`SELECT `+inboxCols+` FROM inboxes i
		WHERE i.org_id = ? AND `+afterCondOldest("i.id")+` ORDER BY i.created_at, i.id LIMIT ?`),
		append(append([]any{orgID}, f.afterArgs()...), f.limit())...)
}

// Inbox reads an inbox of the organisation.
func (db Mail) Inbox(ctx context.Context, orgID, id string) (Inbox, error) {
	return scanInbox(db.ex.QueryRowContext(ctx, db.q(`SELECT `+inboxCols+` FROM inboxes i WHERE i.id = ? AND i.org_id = ?`), id, orgID))
}

// Deliver stores a message and counts its bytes against the inbox;
// ErrBudget when the inbox is full.
func (db Mail) Deliver(ctx context.Context, m Message) error {
	return db.atomically(ctx, func(tx *Tx) error {
		_, err := tx.tx.ExecContext(ctx, db.q(`UPDATE inboxes SET bytes_used = bytes_used + ? WHERE id = ?`), m.Size, m.InboxID)
		if isCheckViolation(err) {
			return ErrBudget
		}
		if err != nil {
			return err
		}
		_, err = tx.tx.ExecContext(ctx, db.q(`INSERT INTO messages (id, inbox_id, org_id, mail_from, rcpt, from_header, subject, received_at, size, headers, text_body, html_body, attachments, auth, raw_sha256)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			m.ID, m.InboxID, m.OrgID, m.MailFrom, m.Rcpt, m.FromHeader, m.Subject, m.ReceivedAt.UnixMicro(), m.Size, m.Headers, m.Text, m.HTML, m.Attachments, m.Auth, m.RawSHA256)
		return err
	})
}

const messageCols = `id, inbox_id, org_id, mail_from, rcpt, from_header, subject, received_at, size, headers, text_body, html_body, attachments, auth, raw_sha256`

func scanMessage(row interface{ Scan(...any) error }) (Message, error) {
	var m Message
	var r int64
	err := row.Scan(&m.ID, &m.InboxID, &m.OrgID, &m.MailFrom, &m.Rcpt, &m.FromHeader, &m.Subject, &r, &m.Size, &m.Headers, &m.Text, &m.HTML, &m.Attachments, &m.Auth, &m.RawSHA256)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	m.ReceivedAt = time.UnixMicro(r).UTC()
	return m, err
}

// MessageFilter selects an inbox's messages.
type MessageFilter struct {
	From, Subject string
	Since         time.Time
	// Before pages: messages older than this one.
	Before string
	Limit  int
	// Oldest lists oldest first.
	Oldest bool
}

// Messages lists an inbox's messages, newest first (oldest first with
// f.Oldest).
func (db Mail) Messages(ctx context.Context, orgID, inboxID string, f MessageFilter) ([]Message, error) {
	q := `SELECT ` + messageCols + ` FROM messages WHERE org_id = ? AND inbox_id = ?`
	args := []any{orgID, inboxID}
	if f.From != "" {
		q += ` AND (LOWER(from_header) LIKE ? ESCAPE '\' OR LOWER(mail_from) LIKE ? ESCAPE '\')`
		pat := "%" + likeEscape(f.From) + "%"
		args = append(args, pat, pat)
	}
	if f.Subject != "" {
		q += ` AND LOWER(subject) LIKE ? ESCAPE '\'`
		args = append(args, "%"+likeEscape(f.Subject)+"%")
	}
	if !f.Since.IsZero() {
		q += ` AND received_at >= ?`
		args = append(args, f.Since.UnixMicro())
	}
	if f.Before != "" {
		q += ` AND (received_at, id) < (SELECT received_at, id FROM messages WHERE id = ?)`
		args = append(args, f.Before)
	}
	if f.Limit <= 0 || f.Limit > 200 {
		f.Limit = 50
	}
	if f.Oldest {
		q += ` ORDER BY received_at ASC, id ASC LIMIT ?`
	} else {
		q += ` ORDER BY received_at DESC, id DESC LIMIT ?`
	}
	args = append(args, f.Limit)
	return collect(ctx, db.ex, scanMessage, db.q(q), args...)
}

// likeEscape lowers s (ASCII only, as SQLite's LOWER does) and escapes
// LIKE's wildcards, so that a search for "50%" or "a_b" finds them as
// written.
func likeEscape(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		out = append(out, r)
	}
	return likeLiteral(string(out))
}

// Message reads a message of the organisation.
func (db Mail) Message(ctx context.Context, orgID, id string) (Message, error) {
	return scanMessage(db.ex.QueryRowContext(ctx, db.q(`SELECT `+messageCols+` FROM messages WHERE id = ? AND org_id = ?`), id, orgID))
}

// DeleteMessage removes a message and gives its bytes back to the inbox.
func (db Mail) DeleteMessage(ctx context.Context, orgID, id string) (Message, error) {
	var m Message
	err := db.atomically(ctx, func(tx *Tx) error {
		var err error
		if m, err = tx.Mail().Message(ctx, orgID, id); err != nil {
			return err
		}
		if _, err := tx.tx.ExecContext(ctx, db.q(`DELETE FROM messages WHERE id = ?`), id); err != nil {
			return err
		}
		_, err = tx.tx.ExecContext(ctx, db.q(`UPDATE inboxes SET bytes_used = bytes_used - ? WHERE id = ?`), m.Size, m.InboxID)
		return err
	})
	return m, err
}

// ProposeRegistrant stores a registrant waiting for confirmation. Older
// proposals for the domain still pending are superseded, so their links no
// longer confirm anything; it returns them, for their tasks to end. Call
// it in a transaction.
func (db Mail) ProposeRegistrant(ctx context.Context, r Registrant) ([]Registrant, error) {
	older, err := collect(ctx, db.ex, scanRegistrant, db.q(`SELECT `+registrantCols+` FROM registrant_contacts WHERE domain = ? AND state = 'pending'`), r.Domain)
	if err != nil {
		return nil, err
	}
	if _, err := db.ex.ExecContext(ctx, db.q(`UPDATE registrant_contacts SET state = 'superseded' WHERE domain = ? AND state = 'pending'`), r.Domain); err != nil {
		return nil, err
	}
	_, err = db.ex.ExecContext(ctx, db.q(`INSERT INTO registrant_contacts (domain, org_id, contact, token_hash, task_id, state, created_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)`),
		r.Domain, r.OrgID, r.Contact, r.TokenHash, r.TaskID, r.CreatedAt.UnixMicro())
	return older, err
}

const registrantCols = `domain, org_id, contact, token_hash, task_id, state, created_at, confirmed_at`

func scanRegistrant(row interface{ Scan(...any) error }) (Registrant, error) {
	var r Registrant
	var c int64
	var cf sql.NullInt64
	err := row.Scan(&r.Domain, &r.OrgID, &r.Contact, &r.TokenHash, &r.TaskID, &r.State, &c, &cf)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	r.CreatedAt = time.UnixMicro(c).UTC()
	if cf.Valid {
		t := time.UnixMicro(cf.Int64).UTC()
		r.ConfirmedAt = &t
	}
	return r, err
}

// RegistrantByToken finds a proposal by its token's hash.
func (db Mail) RegistrantByToken(ctx context.Context, hash string) (Registrant, error) {
	return scanRegistrant(db.ex.QueryRowContext(ctx, db.q(`SELECT `+registrantCols+` FROM registrant_contacts WHERE token_hash = ?`), hash))
}

// ConfirmRegistrant is the compare-and-set that confirms a pending
// proposal once; ErrConflict when it was not pending.
func (db Mail) ConfirmRegistrant(ctx context.Context, hash string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE registrant_contacts SET state = 'confirmed', confirmed_at = ? WHERE token_hash = ? AND state = 'pending'`), now.UnixMicro(), hash)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// RegistrantByTask finds the proposal a registrant task waits on.
func (db Mail) RegistrantByTask(ctx context.Context, domain, taskID string) (Registrant, error) {
	return scanRegistrant(db.ex.QueryRowContext(ctx, db.q(`SELECT `+registrantCols+` FROM registrant_contacts WHERE domain = ? AND task_id = ?`), domain, taskID))
}

// DeclineRegistrant is the compare-and-set that ends a pending proposal a
// person of the organisation declined; ErrConflict when it was not
// pending.
func (db Mail) DeclineRegistrant(ctx context.Context, hash string) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE registrant_contacts SET state = 'declined' WHERE token_hash = ? AND state = 'pending'`), hash)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// CurrentRegistrant is the latest registrant confirmed for the
// organisation's domain; one confirmed under another organisation does
// not count.
func (db Mail) CurrentRegistrant(ctx context.Context, orgID, domain string) (Registrant, error) {
	return scanRegistrant(db.ex.QueryRowContext(ctx, db.q(`SELECT `+registrantCols+` FROM registrant_contacts WHERE domain = ? AND org_id = ? AND state = 'confirmed' ORDER BY confirmed_at DESC LIMIT 1`), domain, orgID))
}
