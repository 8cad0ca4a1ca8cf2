package store_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// BenchmarkQuoteStoreFloor is what a held quote costs the store alone on
// SQLite, whose engine runs in the server's process: the statements
// create_quote runs (LockForQuote, then InsertHeldLogged: the project's
// held money, the quote, its ledger entry), each transaction one quote
// ("alone", as InTx runs it) or four ("grouped", as InGroupTx commits
// quotes that arrive together), with nothing of HTTP, JSON, keys or
// policy. Its cpu-µs/op is the process's CPU per quote, from getrusage;
// create_quote's server CPU (BenchmarkServerCPUCreateQuote in bench/) can
// come down towards it but not below it.
//
//	go test -run '^$' -bench QuoteStoreFloor -benchtime 8000x ./server/internal/store/
func BenchmarkQuoteStoreFloor(b *testing.B) {
	for _, group := range []int{1, 4} {
		name := map[int]string{1: "alone", 4: "grouped"}[group]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			st, err := store.Open(ctx, b.TempDir(), "")
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			now := time.Now().UTC()
			if _, err := st.Accounts().CreateOrganization(ctx, "org_1", "org", now); err != nil {
				b.Fatal(err)
			}
			if err := st.Projects().Create(ctx, store.Project{ID: "prj_1", OrgID: "org_1", Name: "p", LimitMicro: 1 << 60, Policy: "{}", CreatedAt: now}); err != nil {
				b.Fatal(err)
			}
			quote := func(i int) error {
				return st.InGroupTx(ctx, func(tx *store.Tx) error {
					if _, err := tx.Quotes().LockForQuote(ctx, "org_1", "prj_1", "key_1"); err != nil {
						return err
					}
					q := store.Quote{ID: fmt.Sprintf("quo_%08d%x", i, now.UnixNano()), OrgID: "org_1", ProjectID: "prj_1", KeyID: "key_1", AmountMicro: 5_000_000,
						Items:   `[{"kind":"service","workload":"dynamic_service","months":1,"amountMicroUsd":5000000}]`,
						Reasons: "[]", Decision: "ALLOW", State: "held", CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute)}
					r := store.LedgerRecord{OrgID: "org_1", Actor: "key:key_1", Action: "create_quote", ObjectType: "quote", ObjectID: q.ID,
						Details: map[string]any{"projectId": "prj_1", "decision": "ALLOW", "amountMicroUsd": 5_000_000, "held": true, "reasons": []string{}}}
					return tx.Quotes().InsertHeldLogged(ctx, q, r, now, true)
				})
			}
			for i := range 200 { // warm: prepared statements, the page cache
				if err := quote(-1 - i); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			before := processCPU()
			for i := 0; i < b.N; i += group {
				// group goroutines arrive together; the first leads and,
				// yielding once, takes the others into its transaction.
				var wg sync.WaitGroup
				for j := range min(group, b.N-i) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := quote(i + j); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-before)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the process's user and system CPU so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
