package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// BenchmarkKeyByHash is the lookup every API request makes for its key, on
// SQLite: a digest upload of 20,000 files makes it 20,000 times.
func BenchmarkKeyByHash(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, b.TempDir(), "")
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if _, err := st.Accounts().CreateOrganization(ctx, "org_1", "org", now); err != nil {
		b.Fatal(err)
	}
	if err := st.Keys().Create(ctx, store.APIKey{ID: "key_1", OrgID: "org_1", Scopes: []string{"read"}, CreatedAt: now}, "hash-1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := st.Keys().ByHash(ctx, "hash-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
