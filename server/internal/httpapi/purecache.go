package httpapi

import (
	"net/http"

	"github.com/pierhq/pier/server/internal/cache"
)

// pureCache keeps the encoded answers of pure operations (catalog reads whose
// answer is a function of the request alone, x-pure in the contract). A hit
// skips validation and the handler, since the same bytes validated and
// succeeded before; rate limits still apply. It is the server's one bounded
// cache, capped in entries and in bytes.
type pureCache struct {
	c *cache.Cache[string, []byte]
}

func newPureCache(max int) *pureCache {
	// 8 MiB holds thousands of catalog answers; the cap keeps a stream of
	// distinct searches from growing memory past it.
	return &pureCache{c: cache.New(max, 8<<20, func(k string, v []byte) int64 { return int64(len(k) + len(v)) })}
}

func pureKey(opID string, r *http.Request, body []byte) string {
	return opID + "\x00" + r.URL.RawQuery + "\x00" + string(body)
}

func (c *pureCache) get(key string) ([]byte, bool) { return c.c.Get(key) }

func (c *pureCache) put(key string, body []byte) {
	if len(key) > 4096 || len(body) > 256<<10 {
		return
	}
	c.c.Put(key, body)
}
