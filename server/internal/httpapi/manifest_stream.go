package httpapi

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/safetext"
	"github.com/pierhq/pier/server/internal/service"
)

// streamsManifest names the operations whose JSON body carries a whole
// manifest (up to service.MaxManifestFiles entries). Their body is not
// read whole: serveManifest decodes it as it arrives and hands the
// manifest's entries to the service one at a time.
var streamsManifest = map[string]bool{"find_missing_blobs": true, "upload_assets": true}

// streamedKey holds, in a request's context, the manifest the
// middleware streamed into the service.
type streamedKey struct{}

// manifestBody reads a streamed body up to its limit, hashing every byte
// for idempotency and checking that it is UTF-8 as it goes. Until
// keeping is cleared (the body is an object) it keeps what it read, for a
// body that turns out not to be one and is read whole.
type manifestBody struct {
	r       io.Reader
	hash    hash.Hash
	carry   []byte // an incomplete UTF-8 sequence at the end of the last read
	badUTF8 bool
	keeping bool
	kept    []byte
}

func (b *manifestBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.hash.Write(p[:n])
	b.checkUTF8(p[:n])
	if b.keeping {
		b.kept = append(b.kept, p[:n]...)
	}
	if err == io.EOF && len(b.carry) > 0 {
		b.badUTF8 = true
	}
	return n, err
}

// checkUTF8 checks the next bytes, carrying a sequence cut by the read
// into the next one.
func (b *manifestBody) checkUTF8(p []byte) {
	for len(b.carry) > 0 && len(p) > 0 {
		b.carry, p = append(b.carry, p[0]), p[1:]
		if utf8.FullRune(b.carry) {
			if r, size := utf8.DecodeRune(b.carry); r == utf8.RuneError && size <= 1 {
				b.badUTF8 = true
			}
			b.carry = b.carry[:0]
		}
	}
	cut := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-3; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				cut = i
			}
			break
		}
	}
	if !utf8.Valid(p[:cut]) {
		b.badUTF8 = true
	}
	b.carry = append(b.carry, p[cut:]...)
}

// streamed is a manifest body as decoded: the body with the manifest cut
// to its first entry (what the contract's validator and the generated
// decoder still read), the service's intake of every entry, and what the
// entries past the first break of the contract.
type streamed struct {
	small   []byte
	intake  *service.ManifestIntake
	schema  schemaProblems
	text    string
	entries int
}

// errNotObject: the body is not a JSON object; it is read whole and
// refused as any other.
var errNotObject = errors.New("not an object")

// serveManifest serves an operation whose body carries a manifest: the
// body is decoded as it arrives, its manifest's entries checked against
// the contract and handed to the service one at a time, and it is hashed
// as it streams, for idempotency. Then it goes on as chain does with a
// body read whole: text, validation, idempotency, the operation.
func (h *Handler) serveManifest(w http.ResponseWriter, r *http.Request, rt *route, p *auth.Principal) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); r.ContentLength != 0 && (err != nil || mt != "application/json") {
		WriteError(w, r, h.cfg.Log, apierr.Newf("input:unsupported_media_type", "send the body as JSON with Content-Type: application/json (got %q)", r.Header.Get("Content-Type")))
		return
	}
	limit := h.bodyLimit(rt, r)
	body := &manifestBody{r: http.MaxBytesReader(w, r.Body, limit), hash: requestHasher(r), keeping: true}
	mr := &manifestReader{svc: h.cfg.Service, schema: h.doc.Components.Schemas["ManifestFile"].Value, body: body, p: p, upload: rt.op.ID == "upload_assets"}
	s, err := mr.decode(r.Context())
	if errors.Is(err, errNotObject) {
		// Read on, whole, to be refused as the contract says.
		s, err = &streamed{}, nil
		body.keeping = false
		rest, rerr := io.ReadAll(body)
		s.small, err = append(body.kept, rest...), rerr
	}
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		WriteError(w, r, h.cfg.Log, tooLarge(rt.op, limit))
		return
	case err != nil:
		WriteError(w, r, h.cfg.Log, malformed(err))
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(s.small)), int64(len(s.small))
	if err := h.checkStreamed(r, rt, s, body.badUTF8); err != nil {
		WriteError(w, r, h.cfg.Log, err)
		return
	}
	if s.intake != nil {
		r = r.WithContext(context.WithValue(r.Context(), streamedKey{}, s.intake))
	}
	key := r.Header.Get("Idempotency-Key")
	if !rt.op.Idempotent || key == "" {
		h.inner.ServeHTTP(w, r)
		return
	}
	// The body's bytes, as they came: a streamed body is the same
	// request when it is the same bytes.
	h.idempotent(w, r, rt.op, p, key, hex.EncodeToString(body.hash.Sum(nil)), nil)
}

func malformed(err error) *apierr.Error {
	e := apierr.New("input:malformed_json", "body: not valid JSON").WithDetails(models.FieldProblem{Field: "body", Problem: "not valid JSON"})
	e.Cause = err
	return e
}

// checkStreamed refuses a streamed body as chain refuses one read whole:
// text first, then the contract (the cut body's problems, then the
// entries').
func (h *Handler) checkStreamed(r *http.Request, rt *route, s *streamed, badUTF8 bool) error {
	text := func(problem string) error {
		return apierr.Newf("input:invalid_text", "body: %s", problem).WithDetails(models.FieldProblem{Field: "body", Problem: problem})
	}
	// The path and the query, then the body, as checkText takes them.
	if err := checkText(r, nil); err != nil {
		return err
	}
	if badUTF8 {
		return text("the body is not valid UTF-8")
	}
	if p := safetext.JSONProblem(s.small); p != "" {
		return text(p)
	}
	if s.text != "" {
		return text(s.text)
	}
	err := h.validate(r, rt)
	if len(s.schema.details) == 0 {
		return err
	}
	var e *apierr.Error
	if errors.As(err, &e) {
		if len(e.Details) > 0 && e.Details[0].Field != "body" && !strings.HasPrefix(e.Details[0].Field, "body.") {
			return e
		}
		if e.Code != "input:invalid" {
			s.schema.code = e.Code
		}
		s.schema.details = append(e.Details, s.schema.details...)
	}
	return s.schema.refusal()
}

// manifestReader decodes a body whose manifest streams into the service
// (for upload_assets when upload), checking its entries against the
// contract's ManifestFile schema.
type manifestReader struct {
	svc    *service.Service
	schema *openapi3.Schema
	body   *manifestBody
	p      *auth.Principal
	upload bool
}

// decode decodes the body, streaming its manifest's entries into the
// service and keeping its other members as they are.
func (mr *manifestReader) decode(ctx context.Context) (*streamed, error) {
	dec := json.NewDecoder(mr.body)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, err
		}
		return nil, errNotObject
	}
	// An object: nothing of it need be read again.
	mr.body.keeping, mr.body.kept = false, nil
	s := &streamed{schema: schemaProblems{code: "input:invalid"}}
	out := bytes.NewBufferString("{")
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		if key == "manifest" {
			if err := mr.entries(ctx, dec, s, out); err != nil {
				return nil, err
			}
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out.Write(raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	// What follows the object is not read, as by the decoder of a body
	// read whole, but it is part of the body: hashed and checked as text.
	if _, err := io.Copy(io.Discard, mr.body); err != nil {
		return nil, err
	}
	out.WriteByte('}')
	s.small = out.Bytes()
	return s, nil
}

// entries streams a manifest's entries: the first stays in the cut
// body, for the contract's validator; the others are checked against the
// contract's ManifestFile here, and every sound one goes to the service.
// A manifest that is not an array stays in the cut body as a value the
// validator refuses the same way.
func (mr *manifestReader) entries(ctx context.Context, dec *json.Decoder, s *streamed, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('[') {
		return notArray(dec, tok, out)
	}
	s.intake = mr.svc.Bundles.NewManifest(ctx, mr.p, mr.upload)
	out.WriteByte('[')
	opts := []openapi3.SchemaValidationOption{openapi3.VisitAsRequest(), openapi3.MultiErrors()}
	s.entries = 0
	for ; dec.More(); s.entries++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if e, ok := fastEntry(raw); ok && s.entries > 0 {
			// Plainly sound: what the validator would accept, without
			// decoding it into maps for the validator.
			if s.entries == service.MaxManifestFiles {
				s.schema.details = append([]models.FieldProblem{{Field: "body.manifest", Problem: fmt.Sprintf("maximum number of items is %d", service.MaxManifestFiles)}}, s.schema.details...)
			}
			if len(s.schema.details) == 0 {
				s.intake.Add(e)
			}
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		verr := mr.schema.VisitJSON(v, opts...)
		switch {
		case s.entries == 0:
			j, _ := json.Marshal(v)
			out.Write(j)
		case s.entries == service.MaxManifestFiles:
			s.schema.details = append([]models.FieldProblem{{Field: "body.manifest", Problem: fmt.Sprintf("maximum number of items is %d", service.MaxManifestFiles)}}, s.schema.details...)
		}
		if s.entries > 0 && verr != nil {
			s.schema.visit(fmt.Sprintf("body.manifest.%d", s.entries), verr)
		}
		if s.entries > 0 && s.text == "" {
			s.text = safetext.ValueProblem(v)
		}
		if verr == nil && len(s.schema.details) == 0 {
			s.intake.Add(manifestEntryOf(v))
		}
	}
	out.WriteByte(']')
	_, err = dec.Token()
	return err
}

// notArray writes a manifest that is not an array into the cut body as
// the validator will refuse it: a scalar as it is, an object as {}.
func notArray(dec *json.Decoder, tok json.Token, out *bytes.Buffer) error {
	if tok != json.Delim('{') {
		j, _ := json.Marshal(tok)
		out.Write(j)
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	out.WriteString("{}")
	return nil
}

// manifestEntryOf is an entry the contract's ManifestFile accepts, as
// the service takes it.
func manifestEntryOf(v any) service.ManifestEntry {
	o, _ := v.(map[string]any)
	path, _ := o["path"].(string)
	sha, _ := o["sha256"].(string)
	size, _ := o["size"].(float64)
	ctype, _ := o["contentType"].(string)
	return service.ManifestEntry{Path: path, SHA256: sha, Size: int(size), ContentType: ctype}
}
