package httpapi

import (
	"net/http"
	"regexp"

	"github.com/pierhq/pier/server/internal/service"
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
	return readQuoteBody(body, nil)
}

// readQuoteBody reports whether body is a QuoteRequest proved valid (see
// acceptsFast) and, when out is set, reads it into out as the generated
// decoder and QuoteItems would.
func readQuoteBody(body []byte, out *service.QuoteRequest) bool {
	s := jsonScan{b: body}
	seen := 0 // 1: projectId, 2: items
	ok := s.object(func(key string) bool {
		switch {
		case key == "projectId" && seen&1 == 0:
			seen |= 1
			v, ok := s.str()
			if out != nil {
				out.ProjectID = v
			}
			return ok && len(v) <= 64 && resourceID(v)
		case key == "items" && seen&2 == 0:
			seen |= 2
			return s.quoteItems(out)
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
	case len(vs) > 1:
		return false
	}
	return idempotencyKeyText(vs[0])
}

// idempotencyKeyText: 1 to 255 printable ASCII characters without space.
func idempotencyKeyText[S string | []byte](v S) bool {
	if len(v) == 0 || len(v) > 255 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e {
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

// quoteItems reads QuoteRequest.items: 1 to 20 QuoteItems, into out's
// when out is set.
func (s *jsonScan) quoteItems(out *service.QuoteRequest) bool {
	n := 0
	var it service.QuoteItem
	ok := s.array(func() bool {
		n++
		if out == nil {
			return n <= 20 && s.quoteItem(nil)
		}
		it = service.QuoteItem{}
		ok := n <= 20 && s.quoteItem(&it)
		out.Items = append(out.Items, it)
		return ok
	})
	return ok && n >= 1
}

// quoteItem reads one QuoteItem, into it when set.
func (s *jsonScan) quoteItem(it *service.QuoteItem) bool {
	var seen uint8
	var years, months *int
	if it != nil {
		years, months = &it.Years, &it.Months
	}
	ok := s.object(func(key string) bool {
		bit, ok := quoteItemMembers[key]
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		switch key {
		case "years":
			return s.intInto(1, 10, years)
		case "months":
			return s.intInto(1, 36, months)
		}
		v, ok := s.str()
		if !ok {
			return false
		}
		if it != nil {
			setQuoteItem(it, key, v)
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

// setQuoteItem sets it's member key, a string, to v.
func setQuoteItem(it *service.QuoteItem, key, v string) {
	switch key {
	case "kind":
		it.Kind = service.QuoteItemKind(v)
	case "domain":
		it.Domain = v
	case "target":
		it.Target = v
	case "workload":
		it.Workload = v
	case "name":
		it.Name = v
	}
}

// intInto is intIn, the value stored in *v when v is set.
func (s *jsonScan) intInto(lo, hi int, v *int) bool {
	start := s.i
	if !s.intIn(lo, hi) {
		return false
	}
	if v != nil {
		n := 0
		for _, c := range s.b[start:s.i] {
			if c >= '0' && c <= '9' {
				n = n*10 + int(c-'0')
			}
		}
		*v = n
	}
	return true
}

var quoteItemMembers = map[string]uint8{"kind": 1, "domain": 2, "years": 4, "target": 8, "workload": 16, "months": 32, "name": 64}
