package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// The lines waiting to be written are bounded: a process that writes
// faster than the store takes loses its oldest lines, not Pier's memory.
// What is written is numbered in order and kept to the newest LogLines.
func TestLogLinesAreBounded(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(Config{Store: st, LogLines: 100})
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	for i := range maxPending + 5_000 {
		s.Runs.Log("svc_loud", 1, "stdout", fmt.Sprintf("line %d", i), at)
	}
	if n := s.Runs.pendingLines(); n != maxPending {
		t.Fatalf("%d lines wait, the bound is %d", n, maxPending)
	}
	s.Runs.FlushNow(context.Background())
	lines, err := st.ServiceLogs().Read(context.Background(), "svc_loud", store.LogQuery{Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 100 {
		t.Fatalf("%d lines kept, want the newest 100", len(lines))
	}
	last := lines[len(lines)-1]
	if last.Text != fmt.Sprintf("line %d", maxPending+5_000-1) || last.Seq != maxPending {
		t.Fatalf("newest kept line %+v", last)
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].Seq != lines[i-1].Seq+1 {
			t.Fatalf("sequence numbers out of order at %d: %d after %d", i, lines[i].Seq, lines[i-1].Seq)
		}
	}
	// Numbering goes on from what is stored.
	s2 := New(Config{Store: st, LogLines: 100})
	s2.Runs.Log("svc_loud", 1, "stdout", "after a restart", at)
	s2.Runs.FlushNow(context.Background())
	lines, _ = st.ServiceLogs().Read(context.Background(), "svc_loud", store.LogQuery{Limit: 1, Tail: true})
	if len(lines) != 1 || lines[0].Seq != maxPending+1 {
		t.Fatalf("after a restart: %+v", lines)
	}
}
