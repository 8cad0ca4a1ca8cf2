package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pierhq/pier/server/internal/store"
)

func TestGroupTx(t *testing.T) { runCases(t, groupTxCases) }

var errPanicked = errors.New("the transaction panicked")

// groupTxCases are TestGroupTx's cases, each run on every engine (on
// PostgreSQL InGroupTx is InTx, and the same holds).
var groupTxCases = []storeCase{
	{"concurrent transactions commit, each failing alone", func(t *testing.T, w world) {
		boom := errors.New("boom")
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		wins := race(t, 24, func(i int) error {
			c := ctx
			if i%6 == 5 {
				c = cancelled
			}
			return w.st.InGroupTx(c, func(tx *store.Tx) error {
				if err := tx.Projects().MoveMoney(c, w.proj, 0, 1); err != nil {
					return err
				}
				switch i % 6 {
				case 1:
					return boom // after writing: its write is rolled back
				case 3:
					return tx.Projects().MoveMoney(c, w.proj, 0, 1000) // refused by the database
				}
				return nil
			})
		}, boom, store.ErrBudget, context.Canceled)
		p, _ := w.st.Projects().Get(ctx, w.org, w.proj)
		if wins != 12 || p.SpentMicro != 12 {
			t.Fatalf("%d transactions committed and %d spent; want 12 and 12", wins, p.SpentMicro)
		}
	}},
	{"a panic reaches its own caller alone", func(t *testing.T, w world) {
		wins := race(t, 8, func(i int) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = errPanicked
				}
			}()
			return w.st.InGroupTx(ctx, func(tx *store.Tx) error {
				if err := tx.Projects().MoveMoney(ctx, w.proj, 0, 1); err != nil {
					return err
				}
				if i == 3 {
					panic("boom")
				}
				return nil
			})
		}, errPanicked)
		p, _ := w.st.Projects().Get(ctx, w.org, w.proj)
		if wins != 7 || p.SpentMicro != 7 {
			t.Fatalf("%d transactions committed and %d spent; want 7 and 7", wins, p.SpentMicro)
		}
	}},
}
