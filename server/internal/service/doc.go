// Package service is Pier's domain layer: one method per operation, shared by
// the REST and MCP adapters. It returns the contract's models and *apierr.Error
// failures, and knows nothing of HTTP, MCP or HTML.
package service
