package nameindex

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// table is a store of names with when each was added.
type table struct {
	mu    sync.Mutex
	names []Name
	reads int
	// during, when set, runs inside a read, as a change committing while
	// the store is read would.
	during func()
}

func (tb *table) add(name string, at int64) {
	tb.mu.Lock()
	tb.names = append(tb.names, Name{name, at})
	tb.mu.Unlock()
}

func (tb *table) source(_ context.Context, since int64) ([]Name, error) {
	tb.mu.Lock()
	var out []Name
	for _, n := range tb.names {
		if n.Added >= since {
			// Fresh strings, as rows read from a database are.
			out = append(out, Name{strings.Clone(n.Name), n.Added})
		}
	}
	tb.reads++
	during := tb.during
	tb.mu.Unlock()
	if during != nil {
		during()
	}
	return out, nil
}

func TestIndexHoldsEveryNameUntilLoaded(t *testing.T) {
	x := New("hosts", (&table{}).source, slog.Default())
	if !x.Has("anything.example") {
		t.Fatal("an index not yet loaded refused a name; it must send every name to the store")
	}
	if err := x.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if x.Has("anything.example") {
		t.Fatal("a loaded, empty index holds a name")
	}
}

func TestIndexAddsAtOnceAndSyncsWhatItMissed(t *testing.T) {
	tb := &table{}
	tb.add("Shop.Example", 1_000)
	x := New("hosts", tb.source, slog.Default())
	ctx := context.Background()
	if err := x.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !x.Has("shop.example") {
		t.Fatal("loaded index lacks shop.example (names are kept lower case)")
	}
	x.Add("new.example.")
	if !x.Has("new.example") {
		t.Fatal("Add did not take effect at once")
	}
	// A name whose notification was lost, stamped a little before the
	// newest seen (its transaction committed late): the sync reads it.
	tb.add("late.example", 900)
	tb.add("later.example", 5_000)
	if err := x.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"late.example", "later.example"} {
		if !x.Has(n) {
			t.Errorf("sync missed %s", n)
		}
	}
}

func TestLoadKeepsNamesAddedWhileItRead(t *testing.T) {
	tb := &table{}
	x := New("hosts", tb.source, slog.Default())
	tb.during = func() { x.Add("launched.example") }
	if err := x.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !x.Has("launched.example") {
		t.Fatal("a name added while the store was read was lost by the reload")
	}
}

func TestReloadDropsNamesThatAreGone(t *testing.T) {
	tb := &table{}
	tb.add("gone.example", 1)
	x := New("hosts", tb.source, slog.Default())
	ctx := context.Background()
	if err := x.Load(ctx); err != nil {
		t.Fatal(err)
	}
	tb.mu.Lock()
	tb.names = nil
	tb.mu.Unlock()
	if err := x.Sync(ctx); err != nil || !x.Has("gone.example") {
		t.Fatalf("a sync removed a name (%v); only reloads remove", err)
	}
	if err := x.Load(ctx); err != nil || x.Has("gone.example") {
		t.Fatalf("a reload kept a name that is gone (%v)", err)
	}
}

// TestMemoryPerHundredThousandNames bounds what the index costs: the
// figure bench/README.md gives per 100,000 sites.
func TestMemoryPerHundredThousandNames(t *testing.T) {
	tb := &table{}
	for i := range 100_000 {
		tb.add(fmt.Sprintf("shop-%06d--project-%06d.preview.example", i, i), int64(i))
	}
	x := New("hosts", tb.source, slog.Default())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := x.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("100,000 hosts of %d bytes: %.1f MiB", len(tb.names[0].Name), float64(held)/(1<<20))
	if held > 16<<20 {
		t.Fatalf("100,000 hosts hold %d bytes; the bound is 16 MiB", held)
	}
	runtime.KeepAlive(x)
}
