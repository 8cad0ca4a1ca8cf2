package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pierhq/pier/cli/internal/clitest"
	"github.com/pierhq/pier/ledger"
)

// chain builds a valid chain of n entries, as the server appends them.
func chain(t *testing.T, n int) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	prev := ledger.Genesis
	for i := 1; i <= n; i++ {
		e := ledger.Entry{Seq: int64(i), At: fmt.Sprintf("2026-11-21T12:00:%02d.000000Z", i), OrgID: "org_a", Actor: "human:usr_a",
			Action: "decide_gate", ObjectType: "gate", ObjectID: fmt.Sprintf("gat_%d", i),
			Details: map[string]any{"amountMicroUsd": json.Number("40000000"), "decision": "approved"}, PrevHash: prev}
		h, err := e.ComputeHash()
		if err != nil {
			t.Fatal(err)
		}
		e.Hash, prev = h, h
		out = append(out, e)
	}
	return out
}

func writeChain(t *testing.T, entries []ledger.Entry) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	var buf bytes.Buffer
	if err := ledger.WriteJSONL(&buf, entries); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func verifyFile(path string, partial bool) (string, error) {
	f, ts := clitest.NewFactory(nil)
	err := ledgerVerifyRun(&LedgerVerifyOptions{IO: f.IO, File: path, Partial: partial})
	return ts.Out.String(), err
}

func TestLedgerVerifyIntact(t *testing.T) {
	out, err := verifyFile(writeChain(t, chain(t, 5)), false)
	if err != nil || !strings.Contains(out, "5 entries, chain intact") {
		t.Fatalf("%q %v", out, err)
	}
}

// Altering any entry, in any field, is caught, and the report names the
// first broken link.
func TestLedgerVerifyCatchesEveryAlteration(t *testing.T) {
	const n = 6
	alterations := map[string]func(e *ledger.Entry){
		"actor":    func(e *ledger.Entry) { e.Actor = "human:mallory" },
		"action":   func(e *ledger.Entry) { e.Action = "revoke_key" },
		"at":       func(e *ledger.Entry) { e.At = "2030-01-01T00:00:00.000000Z" },
		"object":   func(e *ledger.Entry) { e.ObjectID = "gat_other" },
		"org":      func(e *ledger.Entry) { e.OrgID = "org_b" },
		"details":  func(e *ledger.Entry) { e.Details["amountMicroUsd"] = json.Number("1") },
		"added":    func(e *ledger.Entry) { e.Details["note"] = "x" },
		"decision": func(e *ledger.Entry) { e.Details["decision"] = "denied" },
		"hash":     func(e *ledger.Entry) { e.Hash = strings.Repeat("a", 64) },
		"prevHash": func(e *ledger.Entry) { e.PrevHash = strings.Repeat("b", 64) },
		"seq":      func(e *ledger.Entry) { e.Seq += 10 },
	}
	for name, alter := range alterations {
		for i := 0; i < n; i++ {
			entries := chain(t, n)
			alter(&entries[i])
			_, err := verifyFile(writeChain(t, entries), false)
			if !errors.Is(err, ErrLedgerBroken) {
				t.Fatalf("%s of entry %d: verified", name, i+1)
			}
			// The break is at the altered entry, or at the next one when
			// only its hash changed.
			want1, want2 := fmt.Sprintf("entry %d ", i+1), fmt.Sprintf("entry %d ", i+2)
			if msg := err.Error(); !strings.Contains(msg, want1) && !(name == "hash" && strings.Contains(msg, want2)) {
				t.Errorf("%s of entry %d: reported %v", name, i+1, err)
			}
		}
	}
	// Dropping, reordering or truncating from the front breaks it too.
	entries := chain(t, n)
	for name, mutated := range map[string][]ledger.Entry{
		"dropped middle": append(append([]ledger.Entry{}, entries[:2]...), entries[3:]...),
		"swapped":        {entries[0], entries[2], entries[1], entries[3]},
		"dropped first":  entries[1:],
	} {
		if _, err := verifyFile(writeChain(t, mutated), false); !errors.Is(err, ErrLedgerBroken) {
			t.Errorf("%s: verified", name)
		}
	}
	if _, err := verifyFile(writeChain(t, entries[2:]), true); err != nil {
		t.Errorf("--partial slice: %v", err)
	}
	// An edited line that no longer parses is a failure, not a crash.
	path := writeChain(t, entries)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(b, []byte(`"seq":3`), []byte(`"seq":"3"`), 1), 0o600)
	if _, err := verifyFile(path, false); !errors.Is(err, ErrLedgerBroken) {
		t.Errorf("unparsable line: %v", err)
	}
}

func TestLedgerExportPages(t *testing.T) {
	entries := chain(t, 5)
	var calls []string
	fetch := func(ctx context.Context, after, limit int) ([]byte, error) {
		calls = append(calls, fmt.Sprintf("%d/%d", after, limit))
		var page []ledger.Entry
		for _, e := range entries {
			if e.Seq > int64(after) && len(page) < limit {
				page = append(page, e)
			}
		}
		return json.Marshal(map[string]any{"data": map[string]any{"entries": page}})
	}
	f, ts := clitest.NewFactory(nil)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	if err := ledgerExportRun(context.Background(), &LedgerExportOptions{IO: f.IO, Out: out, PageSize: 2, Fetch: fetch}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, " "); got != "0/2 2/2 4/2" {
		t.Fatalf("pages %s", got)
	}
	if !strings.Contains(ts.Err.String(), "Exported 5 entries") {
		t.Fatalf("stderr %q", ts.Err.String())
	}
	if _, err := verifyFile(out, false); err != nil {
		t.Fatal(err)
	}
}
