package store

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// LogLine is one line of a service's log.
type LogLine struct {
	ServiceID string
	Seq       int64
	At        time.Time
	Stream    string
	Version   int
	Text      string
}

// LogQuery selects log lines: after a sequence number, since a time, of a
// version; Limit lines at most, the newest when Tail.
type LogQuery struct {
	After   int64
	Since   time.Time
	Version int
	Limit   int
	Tail    bool
}

// Append writes log lines.
func (db ServiceLogs) Append(ctx context.Context, lines []LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	return db.atomically(ctx, func(tx *Tx) error {
		c := tx.ServiceLogs()
		var b strings.Builder
		b.WriteString(`INSERT INTO service_logs (service_id, seq, at, stream, version, text) VALUES `)
		args := make([]any, 0, len(lines)*6)
		for i, l := range lines {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, l.ServiceID, l.Seq, l.At.UnixMicro(), l.Stream, l.Version, l.Text)
		}
		b.WriteString(` ON CONFLICT (service_id, seq) DO NOTHING`)
		query := b.String()
		if c.store.engine == Postgres {
			// Not kept in the rewrite table: the statement's length varies.
			query = dollarPlaceholders(query)
		}
		_, err := c.ex.ExecContext(ctx, query, args...)
		return err
	})
}

// LastSeq is the highest sequence number of a service's lines.
func (db ServiceLogs) LastSeq(ctx context.Context, serviceID string) (int64, error) {
	var n sql.NullInt64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT MAX(seq) FROM service_logs WHERE service_id = ?`), serviceID).Scan(&n)
	return n.Int64, err
}

// Trim keeps a service's newest keep lines.
func (db ServiceLogs) Trim(ctx context.Context, serviceID string, keep int64) error {
	last, err := db.LastSeq(ctx, serviceID)
	if err != nil || last <= keep {
		return err
	}
	_, err = db.ex.ExecContext(ctx, db.q(`DELETE FROM service_logs WHERE service_id = ? AND seq <= ?`), serviceID, last-keep)
	return err
}

// Read reads a service's lines, oldest first.
func (db ServiceLogs) Read(ctx context.Context, serviceID string, q LogQuery) ([]LogLine, error) {
	order := "ASC"
	if q.Tail {
		order = "DESC"
	}
	if q.Limit <= 0 || q.Limit > 5000 {
		q.Limit = 200
	}
	var since int64
	if !q.Since.IsZero() {
		since = q.Since.UnixMicro()
	}
	out, err := collect(ctx, db.ex, func(r interface{ Scan(...any) error }) (LogLine, error) {
		var l LogLine
		var at int64
		err := r.Scan(&l.ServiceID, &l.Seq, &at, &l.Stream, &l.Version, &l.Text)
		l.At = time.UnixMicro(at).UTC()
		return l, err
	}, db.q(`SELECT service_id, seq, at, stream, version, text FROM service_logs
		WHERE service_id = ? AND seq > ? AND at >= ? AND (? = 0 OR version = ?) ORDER BY seq `+order+` LIMIT ?`),
		serviceID, q.After, since, q.Version, q.Version, q.Limit)
	if q.Tail {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, err
}
