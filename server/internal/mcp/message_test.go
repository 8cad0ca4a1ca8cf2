package mcp

import (
	"encoding/json"
	"reflect"
	"testing"
)

var messageSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["com","dev"]}}}`,
	`{"jsonrpc":"2.0","id":"a-1","method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":7,"result":{}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x"}}`,
	` { "jsonrpc" : "2.0" , "id" : 2 , "method" : "tools/list" , "params" : null } `,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":null,"arguments":null,"_meta":{"progressToken":1}}}`,
	`{"JSONRPC":"2.0","Id":3,"METHOD":"ping"}`,
	`{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"p\u0069ng"}`,
	`{"jsonrpc":"2.0","id":3,"method":5}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}`,
	`{"jsonrpc":"2.0","id":[1,{"a":"]}"}],"method":"x","other":[true,false,null,-1.5e3]}`,
	`{"jsonrpc":"2.0","id":"\"}","method":"é"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"a","ARGUMENTS":{}}}`,
	`{}`, `[]`, `1`, `"x"`, `null`, `{"a":}`, `{"jsonrpc":"2.0",}`,
	// Syntax the scanner must refuse as encoding/json does.
	`{"jsonrpc":"2.0","id":01}`, `{"jsonrpc":"2.0","id":1.}`, `{"jsonrpc":"2.0","id":-}`, `{"jsonrpc":"2.0","id":1e}`,
	`{"jsonrpc":"2.0","id":-0.5E+7,"method":"ping"}`, `{"jsonrpc":"2.0","id":"a\x"}`, `{"jsonrpc":"2.0","id":"\u12g4"}`,
	`{"jsonrpc":"2.0","id":"\u00e9\n\/"}`, "{\"jsonrpc\":\"2.0\",\"id\":\"a\tb\"}", `{"jsonrpc":"2.0"}x`, `{"jsonrpc":"2.0"},`,
	`{"jsonrpc":"2.0","id":tru}`, `{"jsonrpc":"2.0","id":nul,"method":"ping"}`, `{"jsonrpc":"2.0","x":[1,]}`, `{"jsonrpc":"2.0","x":{"a" 1}}`,
	`{"jsonrpc":"2.0","x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}", `{"jsonrpc":"2.0","id":"open`, `{"jsonrpc"`, `{`,
}

// TestDecodeMessageAgreesWithUnmarshal holds the scanning decoder to
// json.Unmarshal on messages of the common shape and on the ones it must
// hand over.
func TestDecodeMessageAgreesWithUnmarshal(t *testing.T) {
	for _, s := range messageSeeds {
		checkDecodeMessage(t, []byte(s))
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkDecodeMessage(t, raw) })
}

func checkDecodeMessage(t *testing.T, raw []byte) {
	t.Helper()
	var got, want rpcMessage
	gotErr := decodeMessage(raw, &got)
	wantErr := json.Unmarshal(raw, &want)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%s: error %v, json.Unmarshal %v", raw, gotErr, wantErr)
	}
	if !reflect.DeepEqual(normalise(got), normalise(want)) {
		t.Fatalf("%s:\n got %+v %+v\nwant %+v %+v", raw, got, got.Params, want, want.Params)
	}
}

// normalise makes raw values comparable: encoding/json keeps an empty
// RawMessage for an absent member as nil, and so does the scanner.
func normalise(m rpcMessage) any {
	type params struct {
		ProtocolVersion, Name *string
		Arguments             string
	}
	var p *params
	if m.Params != nil {
		p = &params{m.Params.ProtocolVersion, m.Params.Name, string(m.Params.Arguments)}
	}
	return []any{m.JSONRPC, string(m.ID), m.ID == nil, m.Method, p, string(m.Result), m.Result == nil, string(m.Error), m.Error == nil}
}

// BenchmarkDecodeMessage decodes the tools/call message a client sends.
func BenchmarkDecodeMessage(b *testing.B) {
	raw := []byte(messageSeeds[0])
	b.ReportAllocs()
	for b.Loop() {
		var m rpcMessage
		if err := decodeMessage(raw, &m); err != nil {
			b.Fatal(err)
		}
	}
}
