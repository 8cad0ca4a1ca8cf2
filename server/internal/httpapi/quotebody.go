package httpapi

import (
	"net/http"
	"regexp"
)

// A request the contract surely accepts need not go through kin-openapi,
// which decodes the body into maps and walks the schema for it (a tenth
// of a quote's CPU). acceptsFast holds, for the operations agents write
// most, a check that answers true only for a request it has proved
// valid: a plain JSON body of the schema's exact shape, every value in
// range. Anything else (an escape in a string, a number spelt 1.0, a
// duplicate member, a charset on the media type, a query) it leaves to
// the validator, so that every refusal is still the validator's, with
// the same field problems; only the cost of accepting changes.
// TestQuoteBodyFastAcceptsOnlyValid compares it with the validator.
var acceptsFast = map[string]func(r *http.Request, body []byte) bool{
	"create_quote": quoteRequestValid,
}

// quoteRequestValid: see acceptsFast. The schema is QuoteRequest, with the
// optional Idempotency-Key header.
func quoteRequestValid(r *http.Request, body []byte) bool {
	if r.URL.RawQuery != "" || !plainJSONMedia(r) || !idempotencyKeyValid(r) {
		return false
	}
	s := jsonScan{b: body}
	seen := 0 // 1: projectId, 2: items
	ok := s.object(func(key string) bool {
		switch {
		case key == "projectId" && seen&1 == 0:
			seen |= 1
			v, ok := s.str()
			return ok && len(v) <= 64 && resourceID(v)
		case key == "items" && seen&2 == 0:
			seen |= 2
			return s.quoteItems()
		}
		return false
	})
	s.space()
	return ok && seen == 3 && s.i == len(s.b)
}

// plainJSONMedia: one Content-Type, exactly application/json.
func plainJSONMedia(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) == 1 && ct[0] == "application/json"
}

// idempotencyKeyValid: no Idempotency-Key, or one of 1 to 255 printable
// ASCII characters without space (the contract's IdempotencyKey).
func idempotencyKeyValid(r *http.Request) bool {
	vs := r.Header["Idempotency-Key"]
	switch {
	case len(vs) == 0:
		return true
	case len(vs) > 1 || len(vs[0]) == 0 || len(vs[0]) > 255:
		return false
	}
	for i := 0; i < len(vs[0]); i++ {
		if c := vs[0][i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// resourceID: the contract's ResourceId, one or more of [A-Za-z0-9_-].
func resourceID(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// The contract's patterns for a domain (DomainName) and a service name
// (QuoteItem.name), matched as the validator matches them, with Go's
// regexp.
var (
	domainNamePattern  = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{1,24}$`)
	serviceNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
)

// quoteItems reads QuoteRequest.items: 1 to 20 QuoteItems.
func (s *jsonScan) quoteItems() bool {
	n := 0
	ok := s.array(func() bool {
		n++
		return n <= 20 && s.quoteItem()
	})
	return ok && n >= 1
}

// quoteItem reads one QuoteItem.
func (s *jsonScan) quoteItem() bool {
	var seen uint8
	ok := s.object(func(key string) bool {
		bit, ok := quoteItemMembers[key]
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		switch key {
		case "years":
			return s.intIn(1, 10)
		case "months":
			return s.intIn(1, 36)
		}
		v, ok := s.str()
		if !ok {
			return false
		}
		switch key {
		case "kind":
			return v == "domain" || v == "service" || v == "email"
		case "domain":
			return len(v) >= 3 && len(v) <= 253 && domainNamePattern.MatchString(v)
		case "target":
			return v == "edge" || v == "process" || v == "worker" || v == "managed_postgres" || v == "mail"
		case "workload":
			return v == "static_site" || v == "dynamic_service" || v == "worker" || v == "database_backed_app" || v == "mail_enabled_app"
		}
		return serviceNamePattern.MatchString(v) // name
	})
	return ok && seen&1 != 0 // kind is required
}

var quoteItemMembers = map[string]uint8{"kind": 1, "domain": 2, "years": 4, "target": 8, "workload": 16, "months": 32, "name": 64}
