// Package holder is `pier holder keygen|mandate|decide`: the sandbox
// holder's P-256 key, the signed fake-money mandate and signed gate
// decisions. It sends no agent credentials.
package holder
