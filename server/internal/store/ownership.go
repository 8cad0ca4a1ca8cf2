package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// Ownership facts: which service answers for a host (service_hosts), and
// which organisation is buying a domain (domain_claims) or bought it
// (registrar_purchases). Each is one row under a primary key, so both
// engines enforce one owner.

// ClaimHost gives host to a service; ErrConflict when another service holds
// it. Claiming a host the service already holds is a no-op. The insert never
// violates the key, so a PostgreSQL transaction stays usable after a refusal.
func (tx *Tx) ClaimHost(ctx context.Context, host, serviceID, orgID string, now time.Time) error {
	host = strings.ToLower(host)
	res, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO service_hosts (host, service_id, org_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (host) DO NOTHING`),
		host, serviceID, orgID, now.UnixMicro())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var holder string
	if err := tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT service_id FROM service_hosts WHERE host = ?`), host).Scan(&holder); err != nil {
		return err
	}
	if holder != serviceID {
		return ErrConflict
	}
	return nil
}

// ReleaseHost gives one host of a service back.
func (tx *Tx) ReleaseHost(ctx context.Context, serviceID, host string) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`DELETE FROM service_hosts WHERE service_id = ? AND host = ?`), serviceID, strings.ToLower(host))
	return err
}

// ReleaseHosts gives every host of a service back.
func (tx *Tx) ReleaseHosts(ctx context.Context, serviceID string) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`DELETE FROM service_hosts WHERE service_id = ?`), serviceID)
	return err
}

// HostOwner is the service and organisation holding host.
func (s *Store) HostOwner(ctx context.Context, host string) (serviceID, orgID string, err error) {
	err = s.db.QueryRowContext(ctx, s.q(`SELECT service_id, org_id FROM service_hosts WHERE host = ?`), strings.ToLower(host)).Scan(&serviceID, &orgID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", ErrNotFound
	}
	return serviceID, orgID, err
}

// ServiceHosts lists the hosts a service holds.
func (s *Store) ServiceHosts(ctx context.Context, serviceID string) ([]string, error) {
	return collect(ctx, s.db, func(r interface{ Scan(...any) error }) (string, error) {
		var h string
		return h, r.Scan(&h)
	}, s.q(`SELECT host FROM service_hosts WHERE service_id = ? ORDER BY host`), serviceID)
}

// RetireService sets a service's final state (failed or torn_down) and
// gives its hosts back, together: its name is then free in its project and
// its hosts free for their owners.
func (s *Store) RetireService(ctx context.Context, id, state string, now time.Time) error {
	return s.InTx(ctx, func(tx *Tx) error { return tx.RetireService(ctx, id, state, now) })
}

// RetireService is RetireService inside a transaction.
func (tx *Tx) RetireService(ctx context.Context, id, state string, now time.Time) error {
	if _, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE services SET state = ?, updated_at = ? WHERE id = ?`), state, now.UnixMicro(), id); err != nil {
		return err
	}
	return tx.ReleaseHosts(ctx, id)
}

// DetachDomain takes a domain off a service: the service keeps its preview
// host and answers for the domain no more.
func (tx *Tx) DetachDomain(ctx context.Context, serviceID, domain string, now time.Time) error {
	if _, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE services SET domain = NULL, updated_at = ? WHERE id = ?`), now.UnixMicro(), serviceID); err != nil {
		return err
	}
	if err := tx.ReleaseHost(ctx, serviceID, domain); err != nil {
		return err
	}
	return tx.ReleaseHost(ctx, serviceID, "www."+domain)
}

// ClaimDomain records that a launch is buying domain; ErrConflict when it
// is sold, or claimed by another task. Claiming again for the same task is
// a no-op.
func (tx *Tx) ClaimDomain(ctx context.Context, domain, orgID, taskID string, now time.Time) error {
	domain = strings.ToLower(domain)
	var n int
	if err := tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT COUNT(*) FROM registrar_purchases WHERE domain = ?`), domain).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return ErrConflict
	}
	res, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO domain_claims (domain, org_id, task_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (domain) DO NOTHING`),
		domain, orgID, taskID, now.UnixMicro())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var holder string
	if err := tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT task_id FROM domain_claims WHERE domain = ?`), domain).Scan(&holder); err != nil {
		return err
	}
	if holder != taskID {
		return ErrConflict
	}
	return nil
}

// ReleaseDomainClaims drops what a task claimed.
func (tx *Tx) ReleaseDomainClaims(ctx context.Context, taskID string) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`DELETE FROM domain_claims WHERE task_id = ?`), taskID)
	return err
}

// ReleaseDomainClaims drops what a task claimed, outside a transaction.
func (s *Store) ReleaseDomainClaims(ctx context.Context, taskID string) error {
	return s.InTx(ctx, func(tx *Tx) error { return tx.ReleaseDomainClaims(ctx, taskID) })
}

// DomainHolder says who holds a domain: the organisation that bought it
// (sold true) or that a launch is buying it for (sold false); ErrNotFound
// when nobody does.
func (s *Store) DomainHolder(ctx context.Context, domain string) (orgID string, sold bool, err error) {
	return domainHolder(ctx, s.db, s.q, domain)
}

// DomainHolder reads the holder inside a transaction.
func (tx *Tx) DomainHolder(ctx context.Context, domain string) (orgID string, sold bool, err error) {
	return domainHolder(ctx, tx.tx, tx.s.q, domain)
}

type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func domainHolder(ctx context.Context, db rowQuerier, q func(string) string, domain string) (string, bool, error) {
	domain = strings.ToLower(domain)
	var org string
	err := db.QueryRowContext(ctx, q(`SELECT org_id FROM registrar_purchases WHERE domain = ?`), domain).Scan(&org)
	if err == nil {
		return org, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, err
	}
	err = db.QueryRowContext(ctx, q(`SELECT org_id FROM domain_claims WHERE domain = ?`), domain).Scan(&org)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, ErrNotFound
	}
	return org, false, err
}

// TakenDomains returns which of names are sold or being bought, whoever
// holds them.
func (s *Store) TakenDomains(ctx context.Context, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	ph := strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ")
	args := make([]any, 0, 2*len(names))
	for _, n := range names {
		args = append(args, strings.ToLower(n))
	}
	args = append(args, args...)
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT domain FROM registrar_purchases WHERE domain IN (`+ph+`) UNION SELECT domain FROM domain_claims WHERE domain IN (`+ph+`)`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out[d] = true
	}
	return out, rows.Err()
}

// MarkQuoteApproved records the human who approved a quote.
func (tx *Tx) MarkQuoteApproved(ctx context.Context, id, by string) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE quotes SET approved_by = ? WHERE id = ?`), by, id)
	return err
}

// QuoteApproved reports whether a human approved a quote.
func (tx *Tx) QuoteApproved(ctx context.Context, id string) (bool, error) {
	var by sql.NullString
	err := tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT approved_by FROM quotes WHERE id = ?`), id).Scan(&by)
	return by.Valid && by.String != "", err
}

// TasksOnGate lists the tasks waiting on a gate besides the gate's own.
func (tx *Tx) TasksOnGate(ctx context.Context, gateID string) ([]Task, error) {
	return collect(ctx, tx.tx, scanTask, tx.s.q(`SELECT `+taskCols+` FROM tasks WHERE gate_id = ? AND kind = 'launch' ORDER BY created_at, id`), gateID)
}

// SetServiceStateTx updates a service's state inside a transaction.
func (tx *Tx) SetServiceState(ctx context.Context, id, state string, now time.Time) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE services SET state = ?, updated_at = ? WHERE id = ?`), state, now.UnixMicro(), id)
	return err
}

// QuoteGate finds the approval gate a REQUIRES_APPROVAL quote opened.
func (tx *Tx) QuoteGate(ctx context.Context, orgID, quoteID string) (Gate, error) {
	return scanGate(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT `+gateCols+` FROM gates WHERE org_id = ? AND kind = 'quote_approval' AND payload LIKE ? ORDER BY created_at DESC LIMIT 1`),
		orgID, `%"quoteId":"`+quoteID+`"%`))
}

// Usage is what an organisation holds, for its quotas.
type Usage struct {
	// Services counts services not failed or torn down.
	Services int
	// Bundles and BundleBytes count its bundles and the bytes their files
	// decode to (shared blobs counted once per bundle that names them).
	Bundles     int
	BundleBytes int64
}

// OrgUsage reads an organisation's usage.
func (s *Store) OrgUsage(ctx context.Context, orgID string) (Usage, error) {
	var u Usage
	err := s.db.QueryRowContext(ctx, s.q(`SELECT
		(SELECT COUNT(*) FROM services WHERE org_id = ? AND state NOT IN ('failed', 'torn_down')),
		(SELECT COUNT(*) FROM bundles WHERE org_id = ?),
		(SELECT COALESCE(SUM(total_bytes), 0) FROM bundles WHERE org_id = ?)`), orgID, orgID, orgID).Scan(&u.Services, &u.Bundles, &u.BundleBytes)
	return u, err
}
