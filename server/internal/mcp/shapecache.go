package mcp

import "sync"

// shapeCache keeps the request shapes of pure tools' arguments, keyed by
// tool and the arguments exactly as sent. A hit skips decoding and schema
// validation, since the same bytes validated before and validation is a
// function of the bytes; the REST handler still runs in full, rate limits
// and all. It holds at most max entries, evicting the oldest.
type shapeCache struct {
	mu    sync.Mutex
	max   int
	items map[string]*requestShape
	order []string
	next  int
}

func newShapeCache(max int) *shapeCache {
	return &shapeCache{max: max, items: make(map[string]*requestShape, max), order: make([]string, 0, max)}
}

// get misses on the empty key, which marks a call not to cache.
func (c *shapeCache) get(key string) (*requestShape, bool) {
	if key == "" {
		return nil, false
	}
	c.mu.Lock()
	rs, ok := c.items[key]
	c.mu.Unlock()
	return rs, ok
}

func (c *shapeCache) put(key string, rs *requestShape) {
	if len(key) > 4096 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	if len(c.order) < c.max {
		c.order = append(c.order, key)
	} else {
		delete(c.items, c.order[c.next])
		c.order[c.next] = key
		c.next = (c.next + 1) % c.max
	}
	c.items[key] = rs
}
