package store_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server/internal/store"
)

// checkChain fails unless entries run from seq 1, each on the one before,
// each hashing as stored.
func checkChain(t *testing.T, entries []ledger.Entry) {
	t.Helper()
	prev := ledger.Genesis
	for i, e := range entries {
		if e.Seq != int64(i+1) || e.PrevHash != prev {
			t.Fatalf("entry %d (seq %d) does not chain on the one before", i, e.Seq)
		}
		if h, err := e.ComputeHash(); err != nil || h != e.Hash {
			t.Fatalf("entry %d hashes as %s, stored %s (%v)", e.Seq, h, e.Hash, err)
		}
		prev = e.Hash
	}
}

func TestLedger(t *testing.T) { runCases(t, ledgerCases) }

// ledgerCases are TestLedger's cases, each run on every engine.
var ledgerCases = []storeCase{
	{"chains, reads back as hashed", func(t *testing.T, w world) {
		l := w.st.Ledger()
		for i := range 3 {
			rec := store.LedgerRecord{OrgID: w.org, Actor: "agent:key_1", Action: "create_quote", ObjectType: "quote", ObjectID: "q",
				Details: map[string]any{"n": i, "amount": json.Number("1.50"), "html": "<a&b>"}}
			if i == 0 {
				rec.Details = nil
			}
			e, err := l.Append(ctx, rec, t0)
			if err != nil || e.Seq != int64(i+1) {
				t.Fatalf("append %+v, %v", e, err)
			}
		}
		other := w.other(t, "org_b")
		if e, err := l.Append(ctx, store.LedgerRecord{OrgID: other.org, Action: "x"}, t0); err != nil || e.Seq != 1 || e.PrevHash != ledger.Genesis {
			t.Fatalf("another organisation's chain: %+v, %v", e, err)
		}
		all, err := l.Entries(ctx, w.org, 0, 10)
		if err != nil || len(all) != 3 {
			t.Fatalf("entries %d, %v", len(all), err)
		}
		checkChain(t, all)
		if after, err := l.Entries(ctx, w.org, 2, 10); err != nil || len(after) != 1 || after[0].Seq != 3 {
			t.Fatalf("after 2: %v, %v", after, err)
		}
		tail, err := l.Tail(ctx, w.org, 2)
		if err != nil || len(tail) != 2 || tail[0].Seq != 3 || tail[1].Seq != 2 { // newest first
			t.Fatalf("tail %v, %v", tail, err)
		}
		if tail, err := l.Tail(ctx, w.org, 10); err != nil || len(tail) != 3 {
			t.Fatalf("tail longer than the chain: %d, %v", len(tail), err)
		}
		if tail, err := l.Tail(ctx, "org_none", 10); err != nil || len(tail) != 0 {
			t.Fatalf("tail of no chain: %v, %v", tail, err)
		}
		if _, err := l.Append(ctx, store.LedgerRecord{OrgID: "org_none"}, t0); err == nil {
			t.Fatal("appended to no organisation's chain")
		}
	}},
	{"concurrent appends never fork the chain", func(t *testing.T, w world) {
		const n = 12
		race(t, n, func(i int) error {
			return w.st.InTx(ctx, func(tx *store.Tx) error {
				_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: w.org, Action: "a", Details: map[string]any{"i": fmt.Sprint(i)}}, t0)
				return err
			})
		})
		all, err := w.st.Ledger().Entries(ctx, w.org, 0, 100)
		if err != nil || len(all) != n {
			t.Fatalf("%d entries, %v", len(all), err)
		}
		checkChain(t, all)
	}},
}
