package store

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// InvalidateChannel is the PostgreSQL channel that carries cache
// invalidations between replicas on one database. A key change is
// announced on it from inside the transaction that makes it, so the
// announcement goes out when (and only if) the change commits.
const InvalidateChannel = "pier_invalidate"

// KeysChanged is the payload prefix of a key change on InvalidateChannel;
// the rest is the announcing store's nonce for it.
const KeysChanged = "keys:"

// Bounds of the key cache. Live keys are few (people make them), so
// their bound is only a backstop; unknown hashes are whatever a caller
// sends, so they get a small table of their own and cannot push live keys
// out.
const (
	maxCachedKeys    = 100_000
	maxCachedUnknown = 4096
)

// keyCache answers Keys.Live from memory. A change to any key empties it
// (keys change rarely, and each change is a person's act): on this
// replica after the change commits, on the others when the announcement
// reaches them. On PostgreSQL the cache is trusted only while the
// replica's listener is connected (SetKeysListening); otherwise every
// lookup reads the database, which is the fallback when notifications
// may be missed.
type keyCache struct {
	mu      sync.Mutex
	gen     uint64 // bumped by every forget; a read older than it is not kept
	known   map[string]APIKey
	unknown map[string]struct{}

	listening atomic.Bool
	// echoes: this store's key changes waiting for the replicas'
	// acknowledgements, by nonce (*keyChangeWait).
	echoes sync.Map
}

func newKeyCache() *keyCache {
	return &keyCache{known: map[string]APIKey{}, unknown: map[string]struct{}{}}
}

// get returns the cached answer for hash, and the generation to pass to
// put with the database's answer when there is none.
func (c *keyCache) get(hash string) (k APIKey, found, cached bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.known[hash]; ok {
		return k, true, true, c.gen
	}
	if _, ok := c.unknown[hash]; ok {
		return APIKey{}, false, true, c.gen
	}
	return APIKey{}, false, false, c.gen
}

// put keeps what the database answered at generation gen, unless a
// change came in between: then the answer may predate it.
func (c *keyCache) put(hash string, k APIKey, found bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if found {
		if len(c.known) >= maxCachedKeys {
			evictOne(c.known)
		}
		c.known[hash] = k
		return
	}
	if len(c.unknown) >= maxCachedUnknown {
		evictOne(c.unknown)
	}
	c.unknown[hash] = struct{}{}
}

// evictOne drops an arbitrary entry (map order is randomised).
func evictOne[V any](m map[string]V) {
	for h := range m {
		delete(m, h)
		return
	}
}

func (c *keyCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.known)
	clear(c.unknown)
}

// ForgetKeys empties the key cache: a key changed on another replica or
// this one (payload is what was announced), or the listener reconnected
// and may have missed announcements. It answers the announcement with an
// acknowledgement, which the announcing replica waits for (keysCommitted).
func (s *Store) ForgetKeys(payload string) {
	s.keys.forget()
	nonce, ok := strings.CutPrefix(payload, KeysChanged)
	if !ok || s.engine != Postgres {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, InvalidateChannel, KeysForgotten+nonce)
	}()
}

// KeysForgotten acknowledges the key change named after it: the
// replica that sent it has emptied its key cache.
const KeysForgotten = "keys-forgotten:"

// KeysAcknowledged counts one replica's acknowledgement of a key change
// (payload starts with KeysForgotten).
func (s *Store) KeysAcknowledged(payload string) {
	nonce, _ := strings.CutPrefix(payload, KeysForgotten)
	if v, ok := s.keys.echoes.Load(nonce); ok {
		w := v.(*keyChangeWait)
		if w.acks.Add(1) >= w.want.Load() {
			w.once.Do(func() { close(w.done) })
		}
	}
}

// keyChangeWait is a key change of this store waiting for every
// listening replica to acknowledge it.
type keyChangeWait struct {
	acks, want atomic.Int64
	once       sync.Once
	done       chan struct{}
}

// SetKeysListening says whether this store's replica is listening on
// InvalidateChannel. On PostgreSQL the key cache serves only while it
// is; a listener that (re)connects forgets what it cached before, since
// it may have missed announcements while away.
func (s *Store) SetKeysListening(on bool) {
	if on {
		s.keys.forget()
	}
	s.keys.listening.Store(on)
}

func (s *Store) keyCacheServes() bool {
	return s.engine != Postgres || s.keys.listening.Load()
}

// Live finds a live key by the hash of its secret, from memory when it
// can: ErrNotFound for an unknown or revoked key. This is the lookup of
// every request made with a key.
func (db Keys) Live(ctx context.Context, hash string) (APIKey, error) {
	s := db.store
	if db.tx != nil || !s.keyCacheServes() {
		return live(db.ByHash(ctx, hash))
	}
	k, found, cached, gen := s.keys.get(hash)
	if !cached {
		var err error
		k, err = db.ByHash(ctx, hash)
		switch {
		case err == nil:
			found = true
		case err != ErrNotFound:
			return APIKey{}, err
		}
		s.keys.put(hash, k, found, gen)
	}
	if !found {
		return APIKey{}, ErrNotFound
	}
	return live(k, nil)
}

func live(k APIKey, err error) (APIKey, error) {
	if err == nil && k.RevokedAt != nil {
		return APIKey{}, ErrNotFound
	}
	return k, err
}

// keysChanged is called by every write to api_keys, before it commits:
// on PostgreSQL it announces the change to every replica from inside the
// write's transaction, and it arranges for this store's cache to be
// emptied once the write commits.
func (db Keys) keysChanged(ctx context.Context) error {
	s := db.store
	var nonce string
	if s.engine == Postgres {
		// Waiting from before the announcement: acknowledgements may
		// come before the commit returns.
		nonce = rand.Text()
		w := &keyChangeWait{done: make(chan struct{})}
		w.want.Store(1 << 62)
		s.keys.echoes.Store(nonce, w)
		if _, err := db.ex.ExecContext(ctx, `SELECT pg_notify($1, $2)`, InvalidateChannel, KeysChanged+nonce); err != nil {
			s.keys.echoes.Delete(nonce)
			return err
		}
	}
	if db.tx != nil {
		db.tx.keysNonces = append(db.tx.keysNonces, nonce)
		return nil
	}
	s.keysCommitted(nonce)
	return nil
}

// keysCommitted runs after a key change commits: this store forgets its
// keys now, and on PostgreSQL waits (at most two seconds) until every
// replica listening on the database has acknowledged the announcement,
// so that when the change is answered it is in force on all of them.
func (s *Store) keysCommitted(nonce string) {
	s.keys.forget()
	if nonce == "" {
		return
	}
	defer s.keys.echoes.Delete(nonce)
	v, ok := s.keys.echoes.Load(nonce)
	if !ok || !s.keys.listening.Load() {
		return
	}
	w := v.(*keyChangeWait)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var listeners int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = $1`,
		"LISTEN "+InvalidateChannel).Scan(&listeners); err != nil {
		return
	}
	if w.want.Store(listeners); w.acks.Load() >= listeners {
		return
	}
	select {
	case <-w.done:
	case <-ctx.Done():
	}
}

// keysRolledBack drops the waits of key changes that did not commit.
func (s *Store) keysRolledBack(nonces []string) {
	for _, n := range nonces {
		s.keys.echoes.Delete(n)
	}
}
