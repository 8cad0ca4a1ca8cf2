// Package cache is Pier's one bounded in-memory cache: a map with a cap on
// entries and on total cost (bytes, usually), evicting by the CLOCK
// algorithm, an approximation of least-recently-used whose reads take only
// a shared lock and set a bit. Every cache in the server that an outsider
// can fill (unknown hosts, DNS names, request shapes, file bodies) is one
// of these, so none grows without bound.
package cache

import (
	"sync"
	"sync/atomic"
)

// Cache maps K to V within MaxEntries entries and MaxCost total cost. The
// zero value is not usable; call New.
type Cache[K comparable, V any] struct {
	maxEntries int
	maxCost    int64
	cost       func(K, V) int64

	mu    sync.RWMutex
	items map[K]*entry[K, V]
	ring  []*entry[K, V]
	hand  int
	total int64
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	cost int64
	idx  int
	used atomic.Bool
}

// New returns a cache holding at most maxEntries entries whose costs add
// up to at most maxCost. cost may be nil, making every entry cost 1 (and
// maxCost then another cap on entries); maxCost <= 0 means no cost cap.
func New[K comparable, V any](maxEntries int, maxCost int64, cost func(K, V) int64) *Cache[K, V] {
	if maxEntries < 1 {
		maxEntries = 1
	}
	if cost == nil {
		cost = func(K, V) int64 { return 1 }
	}
	return &Cache[K, V]{maxEntries: maxEntries, maxCost: maxCost, cost: cost, items: make(map[K]*entry[K, V])}
}

// Get returns the value for k and marks it recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.RLock()
	e, ok := c.items[k]
	c.mu.RUnlock()
	if !ok {
		var zero V
		return zero, false
	}
	if !e.used.Load() {
		e.used.Store(true)
	}
	return e.val, true
}

// Put stores v for k, replacing any value, and evicts until the cache is
// within its caps. A value that alone costs more than the cost cap is not
// stored (and any old value for k is dropped); Put reports whether it was
// stored.
func (c *Cache[K, V]) Put(k K, v V) bool {
	cost := c.cost(k, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.remove(e)
	}
	if c.maxCost > 0 && cost > c.maxCost {
		return false
	}
	for len(c.ring) > 0 && (len(c.ring) >= c.maxEntries || (c.maxCost > 0 && c.total+cost > c.maxCost)) {
		c.evict()
	}
	e := &entry[K, V]{key: k, val: v, cost: cost, idx: len(c.ring)}
	c.items[k] = e
	c.ring = append(c.ring, e)
	c.total += cost
	return true
}

// Delete drops k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	if e, ok := c.items[k]; ok {
		c.remove(e)
	}
	c.mu.Unlock()
}

// DeleteFunc drops every entry for which drop is true.
func (c *Cache[K, V]) DeleteFunc(drop func(K, V) bool) {
	c.mu.Lock()
	for i := 0; i < len(c.ring); {
		if e := c.ring[i]; drop(e.key, e.val) {
			c.remove(e) // moves the last entry to i
			continue
		}
		i++
	}
	c.mu.Unlock()
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.ring)
}

// Cost is the total cost of the entries.
func (c *Cache[K, V]) Cost() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.total
}

// evict drops one entry: the first at or after the hand not used since the
// hand last passed it, clearing the bits it passes.
func (c *Cache[K, V]) evict() {
	for {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		e := c.ring[c.hand]
		if e.used.Load() {
			e.used.Store(false)
			c.hand++
			continue
		}
		c.remove(e)
		return
	}
}

// remove drops e, moving the ring's last entry into its slot.
func (c *Cache[K, V]) remove(e *entry[K, V]) {
	delete(c.items, e.key)
	last := len(c.ring) - 1
	moved := c.ring[last]
	c.ring[e.idx] = moved
	moved.idx = e.idx
	c.ring[last] = nil
	c.ring = c.ring[:last]
	c.total -= e.cost
}
