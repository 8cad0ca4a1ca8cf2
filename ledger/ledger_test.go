package ledger

import (
	"bytes"
	"strings"
	"testing"
)

func chain(t *testing.T, n int) []Entry {
	t.Helper()
	var out []Entry
	prev := Genesis
	for i := 1; i <= n; i++ {
		e := Entry{Seq: int64(i), At: "2026-11-21T12:00:00.000000Z", OrgID: "org_a", Actor: "key:k", Action: "create_quote",
			ObjectType: "quote", ObjectID: "quo_" + strings.Repeat("x", i), Details: map[string]any{"amountMicroUsd": 12_500_000 * i, "note": "<&>"}, PrevHash: prev}
		h, err := e.ComputeHash()
		if err != nil {
			t.Fatal(err)
		}
		e.Hash = h
		prev = h
		out = append(out, e)
	}
	return out
}

func TestRoundTripVerifies(t *testing.T) {
	c := chain(t, 5)
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, c); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := Verify(back); b != nil {
		t.Fatal(b)
	}
}

// Altering any field of any entry is detected, at that entry or the next.
func TestTamperingIsDetected(t *testing.T) {
	mutations := map[string]func(*Entry){
		"seq":      func(e *Entry) { e.Seq += 10 },
		"at":       func(e *Entry) { e.At = "2026-11-22T00:00:00.000000Z" },
		"org":      func(e *Entry) { e.OrgID = "org_b" },
		"actor":    func(e *Entry) { e.Actor = "human:h" },
		"action":   func(e *Entry) { e.Action = "launch_service" },
		"object":   func(e *Entry) { e.ObjectID = "quo_other" },
		"details":  func(e *Entry) { e.Details["amountMicroUsd"] = 1 },
		"prevHash": func(e *Entry) { e.PrevHash = strings.Repeat("f", 64) },
		"hash":     func(e *Entry) { e.Hash = strings.Repeat("a", 64) },
	}
	for name, mutate := range mutations {
		for i := 0; i < 5; i++ {
			c := chain(t, 5)
			mutate(&c[i])
			b := Verify(c)
			if b == nil || b.Index < i-1 || b.Index > i+1 {
				t.Errorf("%s at %d: %v", name, i, b)
			}
		}
	}
	c := chain(t, 5)
	if b := Verify(append(c[:2], c[3:]...)); b == nil || b.Index != 2 {
		t.Errorf("dropped entry: %v", b)
	}
	c = chain(t, 5)
	c[1], c[2] = c[2], c[1]
	if b := Verify(c); b == nil || b.Index != 1 {
		t.Errorf("swapped entries: %v", b)
	}
}
