package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Unknown hashes are whatever callers send: remembering them must not
// grow memory without bound, nor push live keys out.
func TestKeyCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if _, err := st.Accounts().CreateOrganization(ctx, "org_1", "org", now); err != nil {
		t.Fatal(err)
	}
	if err := st.Keys().Create(ctx, APIKey{ID: "key_1", OrgID: "org_1", Scopes: []string{"read"}, CreatedAt: now}, "hash-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Keys().Live(ctx, "hash-1"); err != nil {
		t.Fatal(err)
	}
	for i := range maxCachedUnknown + 500 {
		if _, err := st.Keys().Live(ctx, fmt.Sprintf("unknown-%d", i)); err != ErrNotFound {
			t.Fatalf("unknown hash: %v", err)
		}
	}
	st.keys.mu.Lock()
	unknown, known := len(st.keys.unknown), len(st.keys.known)
	st.keys.mu.Unlock()
	if unknown > maxCachedUnknown || known != 1 {
		t.Fatalf("%d unknown hashes kept (at most %d), %d keys (want 1)", unknown, maxCachedUnknown, known)
	}
}
