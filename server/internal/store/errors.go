package store

import (
	"errors"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Constraint violations are told apart by the engines' error codes, never
// by their messages: SQLite's extended result codes and PostgreSQL's
// SQLSTATE.

// ErrBudget is returned when a change would make spent plus held exceed the
// budget limit: the database's CHECK refused it.
var ErrBudget = errors.New("store: budget limit exceeded")

// ErrConflict is returned when a compare-and-set finds the row changed.
var ErrConflict = errors.New("store: state changed")

func isUniqueViolation(err error) bool {
	return sqliteCode(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) ||
		pgCode(err, pgerrcode.UniqueViolation)
}

func isCheckViolation(err error) bool {
	return sqliteCode(err, sqlite3.SQLITE_CONSTRAINT_CHECK) || pgCode(err, pgerrcode.CheckViolation)
}

func sqliteCode(err error, codes ...int) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	for _, c := range codes {
		if e.Code() == c {
			return true
		}
	}
	return false
}

func pgCode(err error, code string) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == code
}
