package mcp

import "github.com/pierhq/pier/server/internal/cache"

// shapeCache keeps the request shapes of read-only tools' arguments, keyed by
// tool and the arguments exactly as sent. A hit skips decoding and schema
// validation, since the same bytes validated before and validation is a
// function of the bytes; the REST handler still runs in full, rate limits
// and all. It is the server's one bounded cache, capped in entries and in
// the bytes of its keys.
type shapeCache struct {
	c *cache.Cache[string, *requestShape]
}

func newShapeCache(max int) *shapeCache {
	return &shapeCache{c: cache.New(max, int64(max)*1024, func(k string, _ *requestShape) int64 { return int64(len(k)) + 64 })}
}

// get misses on the empty key, which marks a call not to cache.
func (c *shapeCache) get(key string) (*requestShape, bool) {
	if key == "" {
		return nil, false
	}
	return c.c.Get(key)
}

func (c *shapeCache) put(key string, rs *requestShape) {
	if len(key) > 4096 {
		return
	}
	c.c.Put(key, rs)
}
