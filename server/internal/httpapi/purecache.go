package httpapi

import (
	"net/http"
	"sync"
)

// pureCache keeps the encoded answers of pure operations (catalog reads whose
// answer is a function of the request alone, x-pure in the contract). A hit
// skips validation and the handler, since the same bytes validated and
// succeeded before; rate limits still apply. It holds at most max entries,
// evicting the oldest.
type pureCache struct {
	mu    sync.Mutex
	max   int
	items map[string][]byte
	order []string
	next  int
}

func newPureCache(max int) *pureCache {
	return &pureCache{max: max, items: make(map[string][]byte, max), order: make([]string, 0, max)}
}

func pureKey(opID string, r *http.Request, body []byte) string {
	return opID + "\x00" + r.URL.RawQuery + "\x00" + string(body)
}

func (c *pureCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	b, ok := c.items[key]
	c.mu.Unlock()
	return b, ok
}

func (c *pureCache) put(key string, body []byte) {
	if len(key) > 4096 || len(body) > 256<<10 {
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
	c.items[key] = body
}
