package store

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"sync"
)

// InGroupTx runs fn in a transaction, as InTx does. On SQLite it commits
// fn together with the other InGroupTx calls that arrive while a
// transaction is running: SQLite has one writer, so the transactions
// would take turns anyway, each paying a BEGIN and a COMMIT of its own,
// and the commit is the write's dearest statement (its pages go to the
// WAL, and every thousand pages a checkpoint copies them into the
// database and syncs it). Concurrent quotes touch the same pages (the
// project's row, the ledger's and the quotes' last pages), so a group
// writes about what one of them would.
//
// Each fn runs inside a savepoint of its own: one that fails rolls back
// alone, and its caller gets its error. A caller returns once its fn is
// committed or has failed, never before: a write whose caller stops
// waiting would still commit. If the group's transaction fails as a whole
// (its COMMIT, or a statement that rolls the whole transaction back), the
// fns that had not failed by themselves run again, each in a transaction
// of its own, so fn must be safe to run twice, as a retried transaction
// is. fn runs on the goroutine of whichever caller leads the group, and
// must not itself call InGroupTx (nor InTx, which on SQLite would wait for
// the write lock the group holds).
//
// On PostgreSQL, whose transactions run side by side and lock rows, it is
// InTx.
func (s *Store) InGroupTx(ctx context.Context, fn func(tx *Tx) error) error {
	if s.engine != SQLite {
		return s.inFoldedTx(ctx, fn)
	}
	return s.txGroup.run(ctx, s, fn)
}

// txGroup queues InGroupTx's callers. The first to arrive leads: it takes
// what is waiting (itself among it, unless more than a group's worth
// waited before it), runs it in one transaction and commits, then hands
// the lead to a caller still waiting: no caller goes on leading groups
// after its own fn is done.
type txGroup struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []*groupMember
	leading bool
}

// maxTxGroup bounds one transaction's members.
const maxTxGroup = 32

type groupMember struct {
	ctx      context.Context
	fn       func(tx *Tx) error
	err      error
	finished bool
	// panicked is what fn panicked with, raised again on its caller's
	// goroutine.
	panicked any
}

func (g *txGroup) run(ctx context.Context, s *Store, fn func(tx *Tx) error) error {
	me := &groupMember{ctx: ctx, fn: fn}
	g.mu.Lock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	g.pending = append(g.pending, me)
	yielded := false
	for !me.finished {
		if g.leading {
			g.cond.Wait()
			continue
		}
		if !yielded {
			// Let the goroutines ready to run (requests on their way
			// here) join before leading.
			yielded = true
			g.mu.Unlock()
			runtime.Gosched()
			g.mu.Lock()
			continue
		}
		g.leading = true
		batch := g.pending[:min(len(g.pending), maxTxGroup)]
		g.pending = g.pending[len(batch):]
		g.mu.Unlock()
		s.commitTxGroup(ctx, batch)
		g.mu.Lock()
		for _, m := range batch {
			m.finished = true
		}
		g.leading = false
		g.cond.Broadcast()
	}
	g.mu.Unlock()
	if me.panicked != nil {
		panic(me.panicked)
	}
	return me.err
}

// commitTxGroup runs a group's members in one transaction, each in a
// savepoint, and commits it; a member alone runs as InTx runs it.
func (s *Store) commitTxGroup(ctx context.Context, batch []*groupMember) {
	if len(batch) == 1 {
		m := batch[0]
		m.err = runMember(m, func() error { return s.InTx(m.ctx, m.fn) })
		return
	}
	bg := context.WithoutCancel(ctx)
	t, err := s.db.BeginTx(bg, nil)
	if err != nil {
		for _, m := range batch {
			m.err = err
		}
		return
	}
	var ran []*Tx
	var ranBy []*groupMember
	broken := false
	for _, m := range batch {
		tx := &Tx{tx: t, s: s}
		tx.nouns = nouns{conn{store: s, ex: t, tx: tx}}
		if !savepoint(bg, t, "SAVEPOINT grouped") {
			broken = true
			break
		}
		err := runMember(m, func() error { return m.fn(tx) })
		if err != nil && !savepoint(bg, t, "ROLLBACK TO grouped") {
			broken = true
			break
		}
		if !savepoint(bg, t, "RELEASE grouped") {
			// The whole transaction was rolled back under the member (an
			// interrupted statement does that on SQLite).
			broken = true
			break
		}
		if err != nil {
			m.err = err
			s.keysRolledBack(tx.keysNonces)
			continue
		}
		ran, ranBy = append(ran, tx), append(ranBy, m)
	}
	if broken {
		t.Rollback()
		for _, tx := range ran {
			s.keysRolledBack(tx.keysNonces)
		}
		s.runAlone(batch)
		return
	}
	err = t.Commit()
	for _, tx := range ran {
		tx.committed(err)
	}
	if err != nil {
		s.runAlone(ranBy)
		return
	}
	for _, m := range ranBy {
		m.err = err
	}
}

// runAlone runs again, each in a transaction of its own, the members of
// a group whose transaction failed that had not failed by themselves.
func (s *Store) runAlone(members []*groupMember) {
	for _, m := range members {
		if m.err != nil || m.panicked != nil {
			continue
		}
		m.err = runMember(m, func() error { return s.InTx(m.ctx, m.fn) })
	}
}

// runMember runs a member's part, keeping a panic for its caller.
func runMember(m *groupMember, run func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			m.panicked = r
			err = errors.New("store: the transaction panicked")
		}
	}()
	return run()
}

func savepoint(ctx context.Context, t *sql.Tx, stmt string) bool {
	_, err := t.ExecContext(ctx, stmt)
	return err == nil
}
