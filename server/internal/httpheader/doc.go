// Package httpheader reads the comma-separated request headers the server's
// transports share (Accept, If-None-Match), so that the REST API, MCP and
// the edge read them alike. It holds no state and knows nothing of routes.
package httpheader
