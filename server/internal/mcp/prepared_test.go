package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// preparedSeed is the message kept in FuzzPreparedFind.
const preparedSeed = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["com","dev"]}}}`

// FuzzPreparedFind holds find to its promise: a message it matches with
// the kept one is that message with another id, a string or a number, as
// encoding/json decodes both.
func FuzzPreparedFind(f *testing.F) {
	for _, id := range []string{`1`, `0`, `-7`, `123456789012345678901234567890`, `-1.5e300`, `"a"`, `""`, `"a\"b\\c\u00e9"`,
		`"é"`, "\"\xff\"", `01`, `1.`, `-`, `"a`, `null`, `true`, `{}`, `[1]`, `1 `, ` 1`, `"\x"`, "\"a\x01\"", `1,"x":2`, `1}`} {
		f.Add([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["com","dev"]}}}`))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["com","dev"]}}} `))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["com","dev"]}},"id":2}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		pc := newPreparedCalls(16)
		kept := []byte(preparedSeed)
		var m rpcMessage
		if !scanMessage(kept, &m) {
			t.Fatal("the kept message does not scan")
		}
		pc.keep(kept, &m, &preparedNote{tool: &compiledTool{}, result: []byte(`{}`)})
		p, id := pc.find(msg)
		if p == nil {
			return
		}
		var got, want map[string]any
		if err := json.Unmarshal(msg, &got); err != nil {
			t.Fatalf("found %q, which is not JSON: %v", msg, err)
		}
		json.Unmarshal(kept, &want)
		var gotID any
		if err := json.Unmarshal(id, &gotID); err != nil || !bytes.Equal(bytes.TrimSpace(id), id) {
			t.Fatalf("found %q with the id %q", msg, id)
		}
		switch gotID.(type) {
		case string, float64:
		default:
			t.Fatalf("found %q with the id %q, neither a string nor a number", msg, id)
		}
		if !jsonSame(got["id"], gotID) {
			t.Fatalf("found %q with the id %q, but its id is %v", msg, id, got["id"])
		}
		delete(got, "id")
		delete(want, "id")
		if !jsonSame(got, want) {
			t.Fatalf("found %q, which is not the kept message but for its id", msg)
		}
		var m2 rpcMessage
		if !scanMessage(msg, &m2) || !bytes.Equal(m2.ID, id) {
			t.Fatalf("found %q with the id %q; the scanner reads %q", msg, id, m2.ID)
		}
	})
}

func jsonSame(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// A message kept under an id that is not where the quick search finds
// one (an "id" member inside its params, before the message's own) is
// not kept, so nothing is found by it.
func TestPreparedKeepsOnlyTheMessageID(t *testing.T) {
	pc := newPreparedCalls(16)
	msg := []byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","arguments":{"id":5}},"id":2}`)
	var m rpcMessage
	if !scanMessage(msg, &m) {
		t.Fatal("does not scan")
	}
	pc.keep(msg, &m, &preparedNote{tool: &compiledTool{}, result: []byte(`{}`)})
	if p, _ := pc.find(msg); p != nil {
		t.Fatal("kept by the id among its arguments")
	}
	if p, _ := pc.find(bytes.Replace(msg, []byte(`"id":5`), []byte(`"id":6`), 1)); p != nil {
		t.Fatal("found with other arguments")
	}
}
