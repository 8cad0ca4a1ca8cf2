// Package service is Pier's domain layer: one method per operation, shared by
// the REST and MCP adapters. Its tasks, quotes, launch requests, domains,
// services, versions, logs and receipts are its own types, with typed states
// and kinds (states.go), which the adapters map to the contract and derive
// next steps from; the nouns not yet moved still return the contract's models
// (imports_test.go lists them). Failures are *apierr.Error, whose actions are
// part of the refusal. It knows nothing of HTTP, MCP or HTML. Each noun holds
// only what it calls, its neighbours behind interfaces it declares
// (nouns.go); New wires them, and nouns_test.go holds their graph, which has
// no cycle, to the one docs/architecture.md draws.
package service
