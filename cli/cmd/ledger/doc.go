// Package ledger is `pier ledger verify|export`: the organisation's
// hash-chained ledger written to a file and checked offline, beside the
// generated `pier ledger list`.
package ledger
