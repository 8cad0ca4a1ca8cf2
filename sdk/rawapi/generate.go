// Package rawapi is oapi-codegen's client for the contract, generated with
// its stock templates: one request builder and one typed response per
// operation. Package sdk wraps it with retries, idempotency keys and typed
// errors; use it directly only to see the raw HTTP answers.
package rawapi

//go:generate go tool oapi-codegen -config oapi-client.yaml ../../openapi/openapi.yaml
