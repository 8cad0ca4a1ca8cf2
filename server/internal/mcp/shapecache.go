package mcp

import (
	"github.com/pierhq/pier/server/internal/cache"
)

// shapeCache keeps, for read-only tools, what a call with the same
// arguments made before, keyed by tool and the arguments exactly as sent:
// the request shape, so a hit skips decoding and schema validation (the same
// bytes validated before, and validation is a function of the bytes), and
// the last REST answer with the tools/call result made from it, so a hit
// whose REST answer is the same bytes skips re-encoding it. The REST handler
// still runs in full on every call, rate limits, credentials and all: only
// the work that is a function of bytes already seen is skipped. It is
// bounded in entries and in the bytes it holds.
type shapeCache struct {
	c *cache.Cache[string, *keptShape]
}

// keptShape is one entry. It is never changed once in the cache: a new
// answer replaces the entry.
type keptShape struct {
	rs *requestShape
	// The REST answer (status, Content-Type, body) that result encodes,
	// or none yet.
	status      int
	contentType string
	rest        []byte
	result      []byte
}

// maxKeptAnswer is the largest REST answer whose result is kept: catalog
// answers are a few KiB, and the cap keeps one large answer from taking
// the cache's room.
const maxKeptAnswer = 32 << 10

func newShapeCache(max int) *shapeCache {
	return &shapeCache{c: cache.New(max, 8<<20, func(k string, v *keptShape) int64 {
		return int64(len(k)+len(v.rest)+len(v.result)+len(v.contentType)) + 128
	})}
}

// get misses on the empty key, which marks a call not to cache.
func (c *shapeCache) get(key string) (*keptShape, bool) {
	if key == "" {
		return nil, false
	}
	return c.c.Get(key)
}

func (c *shapeCache) put(key string, k *keptShape) {
	if key == "" || len(key) > 4096 {
		return
	}
	c.c.Put(key, k)
}

// answered reports whether the kept result encodes this REST answer.
func (k *keptShape) answered(status int, contentType string, body []byte) bool {
	return k.result != nil && k.status == status && k.contentType == contentType && sameAnswer(k.rest, body)
}
