package models

import "strings"

// BlockedByInfo is one row of the contract's blockedBy table.
type BlockedByInfo struct {
	Status      int
	Retryable   bool
	Description string
}

// LookupBlockedBy returns the table row for a blockedBy code.
func LookupBlockedBy(code BlockedBy) (BlockedByInfo, bool) {
	info, ok := blockedByTable[code]
	return info, ok
}

// BlockedByCodes returns every blockedBy code the contract defines.
func BlockedByCodes() []BlockedBy {
	codes := make([]BlockedBy, 0, len(blockedByTable))
	for c := range blockedByTable {
		codes = append(codes, c)
	}
	return codes
}

// Namespace returns the part of a blockedBy code before the colon, such as
// "budget" for "budget:insufficient".
func (b BlockedBy) Namespace() string {
	ns, _, _ := strings.Cut(string(b), ":")
	return ns
}
