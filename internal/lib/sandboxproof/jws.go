package sandboxproof

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
)

// The typ header of each kind of signed object. Distinct values keep one kind
// of signature from being accepted in place of another.
const (
	TypMandate  = "pier-mandate+jwt"
	TypDecision = "pier-gate-decision+jwt"
	TypReceipt  = "pier-receipt+jwt"
	TypProof    = "pier-sandbox-proof"
)

// allowedAlgs is the only algorithm list handed to go-jose: an explicit list
// is what stops "none", HS256 and key-confusion tricks before verification.
var allowedAlgs = []jose.SignatureAlgorithm{jose.ES256}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// decodeB64 accepts only canonical unpadded base64url. go-jose re-encodes the
// payload before verifying while WebCrypto verifiers use the bytes as sent,
// so a non-canonical spelling would split the two; refusing it keeps one
// signing input per object.
func decodeB64(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	if b64(b) != s {
		return nil, errors.New("base64url is not canonical")
	}
	return b, nil
}

// signES256 uses RFC 6979 deterministic ECDSA, so that minting does not
// depend on a random source and test vectors regenerate byte for byte.
func signES256(priv *ecdsa.PrivateKey, signingInput string) ([]byte, error) {
	digest := sha256.Sum256([]byte(signingInput))
	der, err := priv.Sign(nil, digest[:], crypto.SHA256)
	if err != nil {
		return nil, err
	}
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil || len(rest) != 0 {
		return nil, errors.New("sandboxproof: unexpected ECDSA signature encoding")
	}
	out := make([]byte, 64)
	sig.R.FillBytes(out[:32])
	sig.S.FillBytes(out[32:])
	return out, nil
}

type kidHeader struct {
	Alg string `json:"alg"`
	KID string `json:"kid"`
	Typ string `json:"typ"`
}

func signedParts(k *SigningKey, typ string, payload any) (protected, body string, sig []byte, err error) {
	header, err := json.Marshal(kidHeader{Alg: "ES256", KID: k.KID, Typ: typ})
	if err != nil {
		return "", "", nil, err
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return "", "", nil, err
	}
	protected, body = b64(header), b64(p)
	sig, err = signES256(k.Private, protected+"."+body)
	return protected, body, sig, err
}

func signCompact(k *SigningKey, typ string, payload any) (string, error) {
	protected, body, sig, err := signedParts(k, typ, payload)
	if err != nil {
		return "", err
	}
	return protected + "." + body + "." + b64(sig), nil
}

// holderJWS is a verified holder signature: its payload members, kept raw so
// that each can be checked by exact name, and the holder key's thumbprint.
type holderJWS struct {
	members    map[string]json.RawMessage
	thumbprint string
}

// verifyHolderJWS checks a compact JWS signed by the holder key carried in
// its jwk header, with the same strictness the verifier applies: anything the
// server accepts here must later pass verification.
func verifyHolderJWS(compact, typ string) (*holderJWS, error) {
	parts := strings.Split(compact, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not a compact JWS", ErrMalformed)
	}
	var rawHeader []byte
	for i, part := range parts {
		b, err := decodeB64(part)
		if err != nil {
			return nil, fmt.Errorf("%w: segment %d: %v", ErrMalformed, i+1, err)
		}
		if i == 0 {
			rawHeader = b
		}
	}
	header, err := exactMembers(rawHeader, []string{"alg", "typ", "jwk"}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	var alg, gotTyp string
	if json.Unmarshal(header["alg"], &alg) != nil || alg != "ES256" {
		return nil, fmt.Errorf("%w: alg must be ES256", ErrBadSignature)
	}
	if json.Unmarshal(header["typ"], &gotTyp) != nil || gotTyp != typ {
		return nil, fmt.Errorf("%w: typ must be %q", ErrMalformed, typ)
	}
	if _, err := exactMembers(header["jwk"], []string{"kty", "crv", "x", "y"}, nil); err != nil {
		return nil, fmt.Errorf("%w: jwk: %v", ErrMalformed, err)
	}
	jws, err := jose.ParseSignedCompact(compact, allowedAlgs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	sig := jws.Signatures[0]
	if len(sig.Signature) != 64 {
		return nil, fmt.Errorf("%w: ES256 signature must be 64 bytes, got %d", ErrBadSignature, len(sig.Signature))
	}
	key := sig.Header.JSONWebKey
	pub, ok := keyOf(key)
	if !ok {
		return nil, fmt.Errorf("%w: jwk must be a public P-256 key", ErrMalformed)
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	thumb, err := Thumbprint(pub)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(payload, &members); err != nil || members == nil {
		return nil, fmt.Errorf("%w: payload is not a JSON object", ErrMalformed)
	}
	return &holderJWS{members: members, thumbprint: thumb}, nil
}

func keyOf(k *jose.JSONWebKey) (*ecdsa.PublicKey, bool) {
	if k == nil || !k.IsPublic() {
		return nil, false
	}
	pub, ok := k.Key.(*ecdsa.PublicKey)
	if !ok || pub.Curve.Params().Name != "P-256" {
		return nil, false
	}
	return pub, true
}

// exactMembers decodes a JSON object and insists on its member names. It
// reads names exactly, as JavaScript does, rather than through Go's
// case-insensitive struct matching, which would accept "AmountUsd".
func exactMembers(raw []byte, required, optional []string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, checkMembers(m, required, optional)
}

func checkMembers(m map[string]json.RawMessage, required, optional []string) error {
	known := map[string]bool{}
	for _, name := range required {
		known[name] = true
		if _, ok := m[name]; !ok {
			return fmt.Errorf("missing member %q", name)
		}
	}
	for _, name := range optional {
		known[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !known[name] {
			return fmt.Errorf("unknown member %q", name)
		}
	}
	return nil
}
