package models

import "testing"

// LookupBlockedBy searches the generated table, so the table must be sorted
// with each code once; every code finds its own row and no other code
// finds one.
func TestLookupBlockedBy(t *testing.T) {
	if len(blockedByTable) < 20 {
		t.Fatalf("only %d blockedBy codes", len(blockedByTable))
	}
	for i, row := range blockedByTable {
		if i > 0 && blockedByTable[i-1].code >= row.code {
			t.Errorf("%q follows %q: the table is not sorted, or has a code twice", row.code, blockedByTable[i-1].code)
		}
		info, ok := LookupBlockedBy(row.code)
		if !ok || info != row.info {
			t.Errorf("LookupBlockedBy(%q) = %+v, %v; want %+v", row.code, info, ok, row.info)
		}
	}
	for _, code := range []BlockedBy{"", "a", "approval", "approval:denie", "approval:denied ", "zzz", "input:invalid_x"} {
		if _, ok := LookupBlockedBy(code); ok {
			t.Errorf("LookupBlockedBy(%q) found a row", code)
		}
	}
	if codes := BlockedByCodes(); len(codes) != len(blockedByTable) {
		t.Errorf("BlockedByCodes lists %d codes, the table %d", len(codes), len(blockedByTable))
	}
}
