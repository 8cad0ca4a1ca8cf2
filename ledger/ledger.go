// Package ledger defines Pier's audit ledger entries and checks their hash
// chain. Each entry carries the SHA-256 of the entry before it, so altering,
// dropping or reordering any entry breaks every link after it. The server
// appends entries; `pier ledger verify` checks an exported chain offline with
// this same package, which imports nothing of the server.
package ledger

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
)

// Genesis is the prevHash of an organisation's first entry.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Entry is one ledger line.
type Entry struct {
	Seq        int64          `json:"seq"`
	At         string         `json:"at"`
	OrgID      string         `json:"orgId"`
	Actor      string         `json:"actor"`
	Action     string         `json:"action"`
	ObjectType string         `json:"objectType"`
	ObjectID   string         `json:"objectId"`
	Details    map[string]any `json:"details"`
	PrevHash   string         `json:"prevHash"`
	Hash       string         `json:"hash"`
}

// hashed is what the hash covers: every field but the hash itself.
type hashed struct {
	Seq        int64          `json:"seq"`
	At         string         `json:"at"`
	OrgID      string         `json:"orgId"`
	Actor      string         `json:"actor"`
	Action     string         `json:"action"`
	ObjectType string         `json:"objectType"`
	ObjectID   string         `json:"objectId"`
	Details    map[string]any `json:"details"`
	PrevHash   string         `json:"prevHash"`
}

// Canonical returns the bytes the hash covers: compact JSON with object keys
// sorted and numbers kept as written.
func (e Entry) Canonical() ([]byte, error) {
	details, err := normalize(e.Details)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(hashed{e.Seq, e.At, e.OrgID, e.Actor, e.Action, e.ObjectType, e.ObjectID, details, e.PrevHash}); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// normalize round-trips details through JSON with numbers kept as text, so
// that an entry hashes the same before and after export.
func normalize(d map[string]any) (map[string]any, error) {
	if d == nil {
		return map[string]any{}, nil
	}
	if out, ok := normalizedPlain(d); ok {
		return out, nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	return out, dec.Decode(&out)
}

// ComputeHash returns the entry's hash.
func (e Entry) ComputeHash() (string, error) {
	b, err := e.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// BrokenLink reports where a chain first fails.
type BrokenLink struct {
	Index  int   // position in the checked slice, from 0
	Seq    int64 // the entry's sequence number
	Reason string
}

func (b *BrokenLink) Error() string {
	return fmt.Sprintf("ledger broken at entry %d (seq %d): %s", b.Index+1, b.Seq, b.Reason)
}

// Verify checks a chain: contiguous sequence numbers, each prevHash equal
// to the previous entry's hash (Genesis before seq 1), each hash matching
// its entry, and one organisation throughout. It returns the first broken
// link, or nil.
func Verify(entries []Entry) *BrokenLink {
	for i, e := range entries {
		if i == 0 {
			if e.Seq == 1 && e.PrevHash != Genesis {
				return &BrokenLink{i, e.Seq, "the first entry must follow the genesis hash"}
			}
		} else {
			prev := entries[i-1]
			if e.OrgID != prev.OrgID {
				return &BrokenLink{i, e.Seq, "entry belongs to another organisation"}
			}
			if e.Seq != prev.Seq+1 {
				return &BrokenLink{i, e.Seq, fmt.Sprintf("sequence jumps from %d to %d", prev.Seq, e.Seq)}
			}
			if e.PrevHash != prev.Hash {
				return &BrokenLink{i, e.Seq, "prevHash does not match the previous entry's hash"}
			}
		}
		h, err := e.ComputeHash()
		if err != nil {
			return &BrokenLink{i, e.Seq, err.Error()}
		}
		if h != e.Hash {
			return &BrokenLink{i, e.Seq, "hash does not match the entry's contents"}
		}
	}
	return nil
}

// ReadJSONL reads one entry per line.
func ReadJSONL(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		dec.DisallowUnknownFields()
		var e Entry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// WriteJSONL writes one entry per line.
func WriteJSONL(w io.Writer, entries []Entry) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}
