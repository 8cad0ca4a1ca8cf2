package mcp

import (
	"bytes"
	"encoding/json"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// initialize and tools/list are encoded with Pier's own copies of the SDK's
// protocol types (so the binary does not link the SDK); the bytes are the
// ones the SDK's types give, for every tool.
func TestStaticResultsMatchTheSDK(t *testing.T) {
	var tools []*compiledTool
	var sdkTools []*mcpsdk.Tool
	for _, tool := range Tools {
		ct, err := compile(tool)
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, ct)
		destructive := ct.Destructive
		sdkTools = append(sdkTools, &mcpsdk.Tool{
			Name:        ct.Name,
			Title:       ct.Title,
			Description: ct.Description,
			InputSchema: json.RawMessage(ct.InputSchema),
			Annotations: &mcpsdk.ToolAnnotations{
				Title:           ct.Title,
				ReadOnlyHint:    ct.ReadOnly,
				DestructiveHint: &destructive,
				IdempotentHint:  ct.Idempotent,
			},
		})
	}
	initialize, list, err := staticResults("1.2.3", tools)
	if err != nil {
		t.Fatal(err)
	}
	wantInitialize, err := json.Marshal(&mcpsdk.InitializeResult{
		ProtocolVersion: ProtocolVersion,
		Capabilities:    &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{}},
		ServerInfo:      &mcpsdk.Implementation{Name: "pier", Title: "Pier", Version: "1.2.3"},
		Instructions:    instructions,
	})
	if err != nil {
		t.Fatal(err)
	}
	wantList, err := json.Marshal(&mcpsdk.ListToolsResult{Tools: sdkTools})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(initialize, wantInitialize) {
		t.Errorf("initialize:\n got %s\nwant %s", initialize, wantInitialize)
	}
	if !bytes.Equal(list, wantList) {
		t.Errorf("tools/list differs from the SDK's:\n got %.600s\nwant %.600s", list, wantList)
	}
	if len(tools) < 10 {
		t.Fatalf("only %d tools", len(tools))
	}
}
