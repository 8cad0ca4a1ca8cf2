package models

import "strings"

// BlockedByInfo is one row of the contract's blockedBy table.
type BlockedByInfo struct {
	Status      int
	Retryable   bool
	Description string
}

// blockedByRow is one row of blockedByTable.
type blockedByRow struct {
	code BlockedBy
	info BlockedByInfo
}

// LookupBlockedBy returns the table row for a blockedBy code.
func LookupBlockedBy(code BlockedBy) (BlockedByInfo, bool) {
	lo, hi := 0, len(blockedByTable)
	for lo < hi { // the first row whose code is not below code
		m := int(uint(lo+hi) >> 1)
		if blockedByTable[m].code < code {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(blockedByTable) && blockedByTable[lo].code == code {
		return blockedByTable[lo].info, true
	}
	return BlockedByInfo{}, false
}

// BlockedByCodes returns every blockedBy code the contract defines.
func BlockedByCodes() []BlockedBy {
	codes := make([]BlockedBy, len(blockedByTable))
	for i, row := range blockedByTable {
		codes[i] = row.code
	}
	return codes
}

// Namespace returns the part of a blockedBy code before the colon, such as
// "budget" for "budget:insufficient".
func (b BlockedBy) Namespace() string {
	ns, _, _ := strings.Cut(string(b), ":")
	return ns
}
