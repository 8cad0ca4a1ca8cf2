package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/store"
)

// invalidateChannel carries cache invalidations between replicas on one
// PostgreSQL: a launch, teardown or zone change on one replica reaches the
// edge and DNS caches of every other at once. A missed notification costs
// at most the caches' own revalidation interval (2 s), which is the
// periodic reconciliation. Key changes travel on it too, announced by the
// store from inside their transactions (store.KeysChanged); the store
// serves keys from memory only while this replica listens.
const invalidateChannel = store.InvalidateChannel

// invalidations carry the edge's and DNS's cache invalidations between
// replicas on one PostgreSQL: announce tells the others, listen applies
// theirs here. On SQLite there are no others and both do nothing.
type invalidations struct {
	store       *store.Store
	databaseURL string
	log         *slog.Logger
	edge        *edge.Edge
	dns         *dnsserver.Server
}

type invalidation struct {
	Hosts []string `json:"hosts,omitempty"`
	Zone  string   `json:"zone,omitempty"`
}

// announce tells the other replicas; on SQLite there are none.
func (s *invalidations) announce(inv invalidation) {
	if s.store.Engine() != store.Postgres {
		return
	}
	b, _ := json.Marshal(inv)
	if len(b) > 7900 { // NOTIFY payloads stop at 8000 bytes
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.store.DB().ExecContext(ctx, `SELECT pg_notify($1, $2)`, invalidateChannel, string(b)); err != nil {
		s.log.Warn("announcing a cache invalidation", "err", err)
	}
}

// listen applies the other replicas' invalidations until ctx ends,
// reconnecting after a lost connection (a PostgreSQL restart).
func (s *invalidations) listen(ctx context.Context) {
	if s.store.Engine() != store.Postgres {
		return
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		err := s.listenOnce(ctx)
		if time.Since(began) > 30*time.Second {
			backoff = 100 * time.Millisecond // it had been listening: start over
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("cache invalidation listener lost its connection; reconnecting", "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (s *invalidations) listenOnce(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+invalidateChannel); err != nil {
		return err
	}
	s.store.SetKeysListening(true)
	defer s.store.SetKeysListening(false)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(n.Payload, store.KeysChanged):
			s.store.ForgetKeys(n.Payload)
			continue
		case strings.HasPrefix(n.Payload, store.KeysForgotten):
			s.store.KeysAcknowledged(n.Payload)
			continue
		}
		var inv invalidation
		if json.Unmarshal([]byte(n.Payload), &inv) != nil {
			continue
		}
		if len(inv.Hosts) > 0 {
			s.edge.Invalidate(inv.Hosts...)
		}
		if inv.Zone != "" {
			s.dns.Invalidate(inv.Zone)
		}
	}
}
