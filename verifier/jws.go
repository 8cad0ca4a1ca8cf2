package verifier

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// The typ header of each signed object.
const (
	typMandate  = "pier-mandate+jwt"
	typDecision = "pier-gate-decision+jwt"
	typReceipt  = "pier-receipt+jwt"
	typProof    = "pier-sandbox-proof"
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// decodeB64 accepts only canonical unpadded base64url (docs/sandbox-proof.md
// §1): a second spelling of the same bytes is a second signing input, and
// implementations that re-encode would disagree with those that verify the
// text as sent.
func decodeB64(s string) ([]byte, error) {
	return decodeB64Bytes([]byte(s))
}

// decodeB64Bytes is decodeB64 for text already in a byte slice.
func decodeB64Bytes(src []byte) ([]byte, error) {
	// Strict decoding refuses non-zero unused bits; the length check
	// refuses the line breaks that the decoder skips. Together they accept
	// exactly the texts that re-encode to themselves.
	dst := make([]byte, base64.RawURLEncoding.DecodedLen(len(src)))
	n, err := base64.RawURLEncoding.Strict().Decode(dst, src)
	if err == nil && base64.RawURLEncoding.EncodedLen(n) == len(src) {
		return dst[:n], nil
	}
	if _, err := base64.RawURLEncoding.Decode(dst, src); err != nil {
		return nil, errors.New("not base64url")
	}
	return nil, errors.New("base64url is not canonical")
}

// keySet is a parsed JWKS: keys by kid, plus the order they were listed in.
type keySet struct {
	keys map[string]*ecdsa.PublicKey
	kids []string
}

func parseJWKS(b []byte) (*keySet, error) {
	doc, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	if err := exactly(doc, []string{"keys"}); err != nil {
		return nil, err
	}
	list, ok := doc["keys"].([]any)
	if !ok || len(list) == 0 {
		return nil, errors.New(`"keys" must be a non-empty array`)
	}
	set := &keySet{keys: map[string]*ecdsa.PublicKey{}}
	for i, entry := range list {
		k, ok := entry.(object)
		if !ok {
			return nil, fmt.Errorf("key %d is not an object", i)
		}
		// Checked before the member list so the report says what went wrong.
		if _, leaked := k["d"]; leaked {
			return nil, fmt.Errorf("key %d carries private key material (d)", i)
		}
		if err := exactly(k, []string{"kty", "crv", "x", "y", "kid"}, "alg", "use"); err != nil {
			return nil, fmt.Errorf("key %d: %v", i, err)
		}
		kid, ok := k["kid"].(string)
		if !ok || kid == "" {
			return nil, fmt.Errorf("key %d: kid must be a non-empty string", i)
		}
		if _, dup := set.keys[kid]; dup {
			return nil, fmt.Errorf("kid %q appears twice", kid)
		}
		if alg, ok := k["alg"]; ok && alg != "ES256" {
			return nil, fmt.Errorf("key %q: alg must be ES256", kid)
		}
		if use, ok := k["use"]; ok && use != "sig" {
			return nil, fmt.Errorf("key %q: use must be sig", kid)
		}
		pub, err := ecPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("key %q: %v", kid, err)
		}
		set.keys[kid] = pub
		set.kids = append(set.kids, kid)
	}
	return set, nil
}

// ecPublicKey reads kty, crv, x and y of a JWK object.
func ecPublicKey(k object) (*ecdsa.PublicKey, error) {
	if k["kty"] != "EC" || k["crv"] != "P-256" {
		return nil, errors.New("must be kty EC, crv P-256")
	}
	point := []byte{4}
	for _, name := range []string{"x", "y"} {
		s, ok := k[name].(string)
		if !ok {
			return nil, fmt.Errorf("%s must be a string", name)
		}
		c, err := decodeB64(s)
		if err != nil || len(c) != 32 {
			return nil, fmt.Errorf("%s must be 32 bytes of canonical base64url", name)
		}
		point = append(point, c...)
	}
	// ParseUncompressedPublicKey refuses points that are not on the curve.
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
	if err != nil {
		return nil, errors.New("x, y is not a point on P-256")
	}
	return pub, nil
}

// thumbprint is the RFC 7638 SHA-256 thumbprint of a P-256 key.
func thumbprint(pub *ecdsa.PublicKey) string {
	raw, _ := pub.Bytes()
	canonical := `{"crv":"P-256","kty":"EC","x":"` + b64(raw[1:33]) + `","y":"` + b64(raw[33:65]) + `"}`
	sum := sha256.Sum256([]byte(canonical))
	return b64(sum[:])
}

// signed is a JWS that passed verification.
type signed struct {
	header object
	// payload is left for the claims checks to parse, so that a signed but
	// malformed payload fails there, as it does in the JavaScript twin.
	payload []byte
	key     *ecdsa.PublicKey
}

// keyPicker chooses the verification key from a protected header. The
// header's own claims are never trusted beyond naming a key the verifier
// already has (kid) or carrying the holder key that later checks pin (jwk).
type keyPicker func(header object) (*ecdsa.PublicKey, error)

func byKID(set *keySet, setName string) keyPicker {
	return func(h object) (*ecdsa.PublicKey, error) {
		kid, _ := h["kid"].(string)
		pub, ok := set.keys[kid]
		if !ok {
			return nil, fmt.Errorf("unknown kid %q: not in the %s", kid, setName)
		}
		return pub, nil
	}
}

func byEmbeddedJWK(h object) (*ecdsa.PublicKey, error) {
	jwk, ok := h["jwk"].(object)
	if !ok {
		return nil, errors.New(`header "jwk" must be an object`)
	}
	if err := exactly(jwk, []string{"kty", "crv", "x", "y"}); err != nil {
		return nil, fmt.Errorf("header jwk: %v", err)
	}
	pub, err := ecPublicKey(jwk)
	if err != nil {
		return nil, fmt.Errorf("header jwk: %v", err)
	}
	return pub, nil
}

// verifyCompact checks a compact JWS.
func verifyCompact(t *Timing, compact, typ, keyMember string, pick keyPicker) (*signed, error) {
	start := time.Now()
	defer func() { t.SignatureTime += time.Since(start) }()
	b := []byte(compact)
	i := bytes.IndexByte(b, '.')
	if i < 0 {
		return nil, errCompact
	}
	j := bytes.IndexByte(b[i+1:], '.')
	if j < 0 || bytes.IndexByte(b[i+1+j+1:], '.') >= 0 {
		return nil, errCompact
	}
	j += i + 1
	return verifyParts(t, b[:i], b[i+1:j], b[j+1:], typ, keyMember, pick)
}

var errCompact = errors.New("not a compact JWS (three dot-separated parts)")

// verifyFlattened checks a flattened JWS JSON object (the proof).
func verifyFlattened(t *Timing, doc []byte, typ string, pick keyPicker) (*signed, error) {
	start := time.Now()
	defer func() { t.SignatureTime += time.Since(start) }()
	if protected, payload, signature, ok := fastFlattened(doc); ok {
		return verifyParts(t, protected, payload, signature, typ, "kid", pick)
	}
	obj, err := parseObject(doc)
	if err != nil {
		return nil, err
	}
	if err := exactly(obj, []string{"protected", "payload", "signature"}); err != nil {
		return nil, fmt.Errorf("flattened JWS: %v", err)
	}
	var parts [3][]byte
	for i, name := range []string{"protected", "payload", "signature"} {
		s, err := getString(obj, name)
		if err != nil {
			return nil, err
		}
		parts[i] = []byte(s)
	}
	return verifyParts(t, parts[0], parts[1], parts[2], typ, "kid", pick)
}

// verifyParts checks one signature. Everything that decides which
// algorithm and key apply is checked here first (alg ES256 only, the exact
// header members, typ, a 64-byte R||S signature, the key chosen by the
// verifier); what remains is RFC 7515 §5.2 for ES256: ECDSA P-256 over the
// SHA-256 of the signing input exactly as sent, which crypto/ecdsa checks
// directly. Re-parsing the JWS with a general-purpose library would add
// nothing but time: the proof embeds every other signature, and parsing it
// again cost more than the signature maths (bench/README.md).
func verifyParts(t *Timing, protected, payload, signature []byte, typ, keyMember string, pick keyPicker) (*signed, error) {
	rawHeader, err := decodeB64Bytes(protected)
	if err != nil {
		return nil, fmt.Errorf("protected header: %v", err)
	}
	rawPayload, err := decodeB64Bytes(payload)
	if err != nil || len(rawPayload) == 0 {
		return nil, errors.New("payload: must be non-empty canonical base64url")
	}
	sig, err := decodeB64Bytes(signature)
	if err != nil {
		return nil, fmt.Errorf("signature: %v", err)
	}
	header, ok := fastHeader(rawHeader)
	if !ok {
		if header, err = parseObject(rawHeader); err != nil {
			return nil, fmt.Errorf("protected header: %v", err)
		}
	}
	if header["alg"] != "ES256" {
		return nil, fmt.Errorf("alg %s is refused: only ES256 is allowed", jsonText(header["alg"]))
	}
	if err := exactly(header, []string{"alg", "typ", keyMember}); err != nil {
		return nil, fmt.Errorf("protected header: %v", err)
	}
	if header["typ"] != typ {
		return nil, fmt.Errorf("typ %s, want %q", jsonText(header["typ"]), typ)
	}
	// A DER signature or a 63-byte one is refused before any maths.
	if len(sig) != 64 {
		return nil, fmt.Errorf("ES256 signature must be 64 bytes (R||S), got %d", len(sig))
	}
	key, err := pick(header)
	if err != nil {
		return nil, err
	}
	t.Signatures++
	h := sha256.New()
	h.Write(protected)
	h.Write([]byte{'.'})
	h.Write(payload)
	var digest [sha256.Size]byte
	if !ecdsa.VerifyASN1(key, h.Sum(digest[:0]), rawToDER(sig)) {
		return nil, errors.New("signature does not verify")
	}
	return &signed{header: header, payload: rawPayload, key: key}, nil
}

// rawToDER re-encodes an R||S signature as the ASN.1 SEQUENCE of two
// INTEGERs that ecdsa.VerifyASN1 reads, as ecdsa.Verify does with the two
// numbers: minimal big-endian, a zero byte before a set high bit. A zero R
// or S becomes an empty INTEGER, which VerifyASN1 refuses, as ecdsa.Verify
// refuses a zero.
func rawToDER(sig []byte) []byte {
	out := make([]byte, 2, 72)
	out[0] = 0x30
	for _, n := range [][]byte{sig[:32], sig[32:]} {
		for len(n) > 0 && n[0] == 0 {
			n = n[1:]
		}
		pad := len(n) > 0 && n[0]&0x80 != 0
		l := len(n)
		if pad {
			l++
		}
		out = append(out, 0x02, byte(l))
		if pad {
			out = append(out, 0)
		}
		out = append(out, n...)
	}
	out[1] = byte(len(out) - 2)
	return out
}
