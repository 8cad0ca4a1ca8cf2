// Package nameindex keeps in memory every name a replica could answer for:
// the hosts of live services for the edge, and the zone apexes for DNS. A
// request for a Host, or a DNS query under a name, that the index does not
// hold is answered without any database work, so random names (a flood of
// 404s, or a DNS "water torture" attack of random labels under a zone) cost
// what a lookup in a map costs.
//
// The index may hold a name that is gone (the caller then looks it up in
// the store as before, and answers from what it finds), but must never
// miss one that is there. So names are added at once, and removed only by
// a full reload:
//
//   - Add, called with the names a change touched, on the replica that
//     made it and, through the invalidation notifications, on every other;
//   - a sync every second that reads the names added since the newest one
//     it has seen (less an overlap for transactions that committed late),
//     which catches what a lost notification missed;
//   - a full reload every minute, which drops the names that are gone.
package nameindex

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Name is a name as the store lists it, with when it was added (in
// microseconds since the epoch, as the store keeps times).
type Name struct {
	Name  string
	Added int64
}

// Source lists the names added at or after since (all of them for 0).
type Source func(ctx context.Context, since int64) ([]Name, error)

// Intervals of the index's two reads from the store.
const (
	DefaultSync   = time.Second
	DefaultReload = time.Minute
	// overlap is how far before the newest name seen a sync reads again:
	// a transaction that stamped its name earlier and committed later
	// than that is caught by the next full reload (and by Add before).
	overlap = int64(30 * time.Second / time.Microsecond)
)

// Index is a set of lower-case names without a trailing dot.
type Index struct {
	what   string
	source Source
	log    *slog.Logger

	mu     sync.RWMutex
	names  map[string]struct{}
	newest int64
	ready  bool
	// during holds the names Add put in while a Load read the store
	// (nil when none is reading), which the Load keeps: its read may
	// have begun before they committed.
	during map[string]struct{}
}

// New returns an index that reads names from source; what names them in
// logs ("hosts", "zones"). Until its first load it holds every name, so a
// caller falls back to the store.
func New(what string, source Source, log *slog.Logger) *Index {
	return &Index{what: what, source: source, log: log, names: map[string]struct{}{}}
}

// Norm is name as the index keeps it.
func Norm(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// Has reports whether name may be served: false only when the index is
// loaded and does not hold it. name must already be in Norm's form.
func (x *Index) Has(name string) bool {
	x.mu.RLock()
	_, ok := x.names[name]
	ready := x.ready
	x.mu.RUnlock()
	return ok || !ready
}

// Add puts names in at once, as a change that may have added them commits.
func (x *Index) Add(names ...string) {
	if len(names) == 0 {
		return
	}
	x.mu.Lock()
	for _, n := range names {
		if n == "" {
			continue
		}
		x.names[Norm(n)] = struct{}{}
		if x.during != nil {
			x.during[Norm(n)] = struct{}{}
		}
	}
	x.mu.Unlock()
}

// Len is the number of names held.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.names)
}

// Load replaces the index with every name the store holds now. Loads
// are not run concurrently (Run makes one at a time).
func (x *Index) Load(ctx context.Context) error {
	x.mu.Lock()
	x.during = map[string]struct{}{}
	x.mu.Unlock()
	all, err := x.source(ctx, 0)
	if err != nil {
		x.mu.Lock()
		x.during = nil
		x.mu.Unlock()
		return err
	}
	names := make(map[string]struct{}, len(all))
	var newest int64
	for _, n := range all {
		names[Norm(n.Name)] = struct{}{}
		newest = max(newest, n.Added)
	}
	x.mu.Lock()
	for n := range x.during {
		names[n] = struct{}{}
	}
	x.names, x.newest, x.ready, x.during = names, max(newest, x.newest), true, nil
	x.mu.Unlock()
	return nil
}

// Sync adds the names added since the newest seen, less the overlap.
func (x *Index) Sync(ctx context.Context) error {
	x.mu.RLock()
	since, ready := x.newest-overlap, x.ready
	x.mu.RUnlock()
	if !ready {
		return x.Load(ctx)
	}
	added, err := x.source(ctx, max(since, 1))
	if err != nil {
		return err
	}
	x.mu.Lock()
	for _, n := range added {
		x.names[Norm(n.Name)] = struct{}{}
		x.newest = max(x.newest, n.Added)
	}
	x.mu.Unlock()
	return nil
}

// Run keeps the index current until ctx ends: a sync every sync interval
// and a full reload every reload interval (zero takes the defaults).
func (x *Index) Run(ctx context.Context, sync, reload time.Duration) {
	if sync <= 0 {
		sync = DefaultSync
	}
	if reload <= 0 {
		reload = DefaultReload
	}
	tick := time.NewTicker(sync)
	defer tick.Stop()
	lastLoad := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var err error
		if time.Since(lastLoad) >= reload {
			err, lastLoad = x.Load(ctx), time.Now()
		} else {
			err = x.Sync(ctx)
		}
		if err != nil && ctx.Err() == nil {
			x.log.Warn("name index: reading the store", "index", x.what, "err", err)
		}
	}
}
