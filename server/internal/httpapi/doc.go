// Package httpapi is the REST adapter: it routes each request to its contract
// operation and runs the shared machinery (content negotiation, body limits,
// authentication, rate limits, validation against openapi.yaml, idempotency)
// before oapi-codegen's strict handler calls the service. Every failure leaves
// as the typed error envelope.
package httpapi
