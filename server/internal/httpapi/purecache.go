package httpapi

import (
	"net/http"
	"time"

	"github.com/pierhq/pier/server/internal/cache"
)

// pureCache keeps the encoded answers of pure operations (catalog reads whose
// answer is a function of the request alone, x-pure in the contract), and of
// versioned ones: reads whose answer is a function of the request and of a
// version the store bumps on every write they depend on (Config.Versions). A
// hit skips validation and the handler, since the same bytes validated and
// succeeded before; rate limits still apply. It is the server's one bounded
// cache, capped in entries and in bytes.
type pureCache struct {
	c *cache.Cache[string, kept]
}

// kept is one answer: its bytes, and for a versioned operation the version
// read before the answer was made and when it was made.
type kept struct {
	body    []byte
	version uint64
	at      time.Time
}

func newPureCache(max int) *pureCache {
	// 8 MiB holds thousands of catalog answers; the cap keeps a stream of
	// distinct searches from growing memory past it.
	return &pureCache{c: cache.New(max, 8<<20, func(k string, v kept) int64 { return int64(len(k) + len(v.body) + 32) })}
}

func pureKey(opID string, r *http.Request, body []byte) string {
	return opID + "\x00" + r.URL.RawQuery + "\x00" + string(body)
}

func (c *pureCache) get(key string) (kept, bool) { return c.c.Get(key) }

func (c *pureCache) put(key string, k kept) {
	if len(key) > 4096 || len(k.body) > 256<<10 {
		return
	}
	c.c.Put(key, k)
}
