package httpapi

import (
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

// pureKey names an answer by operation, raw query and body.
func pureKey[Q, B string | []byte](opID string, rawQuery Q, body B) string {
	return opID + "\x00" + string(rawQuery) + "\x00" + string(body)
}

// kept returns the kept answer for key when there is one still good, and
// for a versioned read the version it read, which an answer made now is
// to be kept under. stale is set when there is an answer no longer good.
func (h *Handler) kept(rt *route, key string) (k kept, version uint64, ok, stale bool) {
	versionOf := rt.version
	if versionOf != nil {
		// Read before the answer is made: a write committed meanwhile
		// bumps the version past what the kept answer names.
		version = versionOf()
	}
	k, ok = h.pure.get(key)
	if ok && versionOf != nil && (k.version != version || h.cfg.Now().Sub(k.at) >= versionedMaxAge) {
		return kept{}, version, false, true
	}
	return k, version, ok, false
}

func (c *pureCache) get(key string) (kept, bool) { return c.c.Get(key) }

func (c *pureCache) put(key string, k kept) {
	if len(key) > 4096 || len(k.body) > 256<<10 {
		return
	}
	c.c.Put(key, k)
}
