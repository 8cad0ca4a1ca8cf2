package verifier

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The fast paths must decide and say exactly what the general code they
// stand in for decides and says. These tests hold each one against a plain
// reference: the code as it was before the fast path.

// refDecodeB64 is decodeB64 by definition: decode, then insist that the
// bytes re-encode to the same text.
func refDecodeB64(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64url")
	}
	if b64(b) != s {
		return nil, errors.New("base64url is not canonical")
	}
	return b, nil
}

// refExactly is exactly with a set of known names and a sorted walk.
func refExactly(m object, required []string, optional ...string) error {
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

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

func checkDecodeB64(t *testing.T, s string) {
	got, gotErr := decodeB64(s)
	want, wantErr := refDecodeB64(s)
	if !sameErr(gotErr, wantErr) || string(got) != string(want) {
		t.Fatalf("decodeB64(%q) = %q, %v; want %q, %v", s, got, gotErr, want, wantErr)
	}
}

func checkFlattened(t *testing.T, doc []byte) {
	p, pl, sig, ok := fastFlattened(doc)
	if !ok {
		return
	}
	obj, err := parseObject(doc)
	if err != nil {
		t.Fatalf("fastFlattened took %q, which is not a JSON object: %v", doc, err)
	}
	if err := exactly(obj, []string{"protected", "payload", "signature"}); err != nil {
		t.Fatalf("fastFlattened took %q: %v", doc, err)
	}
	if obj["protected"] != string(p) || obj["payload"] != string(pl) || obj["signature"] != string(sig) {
		t.Fatalf("fastFlattened(%q) = %q, %q, %q; encoding/json says %v", doc, p, pl, sig, obj)
	}
}

func checkHeader(t *testing.T, b []byte) {
	got, ok := fastHeader(b)
	if !ok {
		return
	}
	want, err := parseObject(b)
	if err != nil {
		t.Fatalf("fastHeader took %q, which encoding/json refuses: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fastHeader(%q) = %#v; encoding/json says %#v", b, got, want)
	}
}

func checkExactly(t *testing.T, m object) {
	for _, c := range []struct{ required, optional []string }{
		{[]string{"alg", "typ", "kid"}, nil},
		{[]string{"kty", "crv", "x", "y", "kid"}, []string{"alg", "use"}},
		{nil, nil},
	} {
		gotErr := exactly(m, c.required, c.optional...)
		wantErr := refExactly(m, c.required, c.optional...)
		if !sameErr(gotErr, wantErr) {
			t.Fatalf("exactly(%v, %v, %v) = %v; want %v", m, c.required, c.optional, gotErr, wantErr)
		}
	}
}

var b64Seeds = []string{
	"", "A", "AA", "AAA", "AAAA", "AB", "AQ", "AR", "AAB", "AAE", "Zm9v", "Zm9vYg", "Zm9vYmE",
	"Zm9vYh", "Zm9vYmF", "Zm9v\nYg", "Zm9v\r\nYmE", "Zm9vYg==", "Zm9vYg=", "Zm9v+g", "Zm9v/g", "Zm9v-_",
	"Zm9vY", "\n", "Zm 9v", "Zm9vYmE\n",
}

var headerSeeds = []string{
	`{"alg":"ES256","kid":"k1","typ":"pier-receipt+jwt"}`,
	` { "alg" : "ES256" , "typ" : "x" , "kid" : "k" } `,
	`{"alg":"ES256","jwk":{"crv":"P-256","kty":"EC","x":"a","y":"b"},"typ":"pier-mandate+jwt"}`,
	`{"alg":"ES256","alg":"none"}`, `{"alg":"ES\u0032256"}`, `{"alg":"ES256",}`, `{}`, `{"jwk":{}}`,
	`{"jwk":{"a":{"b":"c"}}}`, `{"alg":null}`, `{"alg":1}`, `{"alg":"é"}`, "{\"alg\":\"\xff\"}", `[]`,
	`{"alg":"ES256"} x`, `{"alg":"ES256"}{}`, `{"a":"b","a":"c"}`, `{"jwk":{"x":"1","x":"2"}}`, `{"alg":"\t"}`,
	`{"alg" "ES256"}`, `{"alg":"ES256"`, `{"alg":"ES256"}}`,
}

var flattenedSeeds = []string{
	`{"protected":"a","payload":"b","signature":"c"}`,
	"{\n  \"signature\": \"c\",\n  \"payload\": \"b-_\",\n  \"protected\": \"a\"\n}\n",
	`{"protected":"a","payload":"b","signature":"c","extra":"d"}`,
	`{"protected":"a","payload":"b"}`, `{"protected":"a","protected":"a","payload":"b"}`,
	`{"protected":"a","payload":"b","signature":"c+"}`, `{"protected":"a","payload":"b","signature":"\u0063"}`,
	`{"protected":"a","payload":"b","signature":1}`, `{"protected":"a","payload":"b","signature":"c"} {}`,
	`{"Protected":"a","payload":"b","signature":"c"}`,
}

func TestFastPathsAgreeWithReference(t *testing.T) {
	for _, s := range b64Seeds {
		checkDecodeB64(t, s)
	}
	for _, h := range headerSeeds {
		checkHeader(t, []byte(h))
		if m, err := parseObject([]byte(h)); err == nil {
			checkExactly(t, m)
		}
	}
	for _, d := range flattenedSeeds {
		checkFlattened(t, []byte(d))
	}
	// The fast paths must be taken for what Pier publishes, or they are
	// only cost: every proof and header of the valid vectors.
	for _, name := range []string{"valid", "valid-decision-denied"} {
		doc, err := os.ReadFile(filepath.Join("testdata/vectors", name, "proof.json"))
		if err != nil {
			t.Fatal(err)
		}
		checkFlattened(t, doc)
		protected, payload, _, ok := fastFlattened(doc)
		if !ok {
			t.Fatalf("%s: the proof does not take the fast path", name)
		}
		headers := []string{string(protected)}
		raw, _ := decodeB64(string(payload))
		var p struct {
			Mandate  string
			Attempts []struct{ Receipt string }
			Gates    []struct{ Decision string }
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		jws := []string{p.Mandate}
		for _, a := range p.Attempts {
			jws = append(jws, a.Receipt)
		}
		for _, g := range p.Gates {
			jws = append(jws, g.Decision)
		}
		for _, c := range jws {
			headers = append(headers, strings.Split(c, ".")[0])
		}
		for _, h := range headers {
			b, err := decodeB64(h)
			if err != nil {
				t.Fatal(err)
			}
			checkHeader(t, b)
			if _, ok := fastHeader(b); !ok {
				t.Fatalf("%s: header %s does not take the fast path", name, b)
			}
		}
	}
}

func FuzzDecodeB64(f *testing.F) {
	for _, s := range b64Seeds {
		f.Add(s)
	}
	f.Fuzz(checkDecodeB64)
}

func FuzzFastHeader(f *testing.F) {
	for _, s := range headerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkHeader(t, b)
		if m, err := parseObject(b); err == nil {
			checkExactly(t, m)
		}
	})
}

func FuzzFastFlattened(f *testing.F) {
	for _, s := range flattenedSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFlattened(t, b) })
}

// rawToDER must give VerifyASN1 what ecdsa.Verify gives it for the same
// two numbers, so that the verdict on every 64-byte signature is the one
// ecdsa.Verify would give.
func TestRawToDER(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("signing input"))
	n := elliptic.P256().Params().N
	fixed := func(x *big.Int) []byte { return x.FillBytes(make([]byte, 32)) }
	var sigs [][]byte
	for range 64 {
		r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		sigs = append(sigs, append(fixed(r), fixed(s)...))
	}
	valid := sigs[0]
	edge := []*big.Int{big.NewInt(0), big.NewInt(1), big.NewInt(0x80), new(big.Int).Sub(n, big.NewInt(1)), n,
		new(big.Int).Lsh(big.NewInt(1), 255), new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))}
	for _, e := range edge {
		sigs = append(sigs, append(fixed(e), valid[32:]...), append(append([]byte{}, valid[:32]...), fixed(e)...))
	}
	for range 64 {
		b := make([]byte, 64)
		rand.Read(b)
		sigs = append(sigs, b)
	}
	for _, sig := range sigs {
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		want := ecdsa.Verify(&priv.PublicKey, digest[:], r, s)
		if got := ecdsa.VerifyASN1(&priv.PublicKey, digest[:], rawToDER(sig)); got != want {
			t.Fatalf("signature %x: VerifyASN1(rawToDER) = %v, ecdsa.Verify = %v", sig, got, want)
		}
		if r.Sign() > 0 && s.Sign() > 0 {
			der, _ := asn1.Marshal(struct{ R, S *big.Int }{r, s})
			if !bytes.Equal(der, rawToDER(sig)) {
				t.Fatalf("signature %x: rawToDER = %x, encoding/asn1 = %x", sig, rawToDER(sig), der)
			}
		}
	}
	if !ecdsa.VerifyASN1(&priv.PublicKey, digest[:], rawToDER(valid)) {
		t.Fatal("a valid signature does not verify")
	}
}

// The tamper check must alter the proof to the same bytes whichever way it
// reads it.
func TestAlterPayloadAsMarshalled(t *testing.T) {
	docs := [][]byte{}
	for _, name := range []string{"valid", "valid-decision-denied", "tampered-payload-byte"} {
		doc, err := os.ReadFile(filepath.Join("testdata/vectors", name, "proof.json"))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
	for _, s := range flattenedSeeds {
		docs = append(docs, []byte(s))
	}
	for _, doc := range docs {
		got, gotAt, gotErr := alterPayload(doc)
		// The reference: the generic decoder and json.Marshal.
		var want []byte
		var wantAt int
		var wantErr error
		if m, err := parseObject(doc); err != nil {
			wantErr = err
		} else if enc, ok := m["payload"].(string); !ok {
			wantErr = errors.New("no payload")
		} else if p, err := decodeB64(enc); err != nil || len(p) == 0 {
			wantErr = errors.New("payload is not base64url")
		} else {
			wantErr = errors.New("payload has no letter or digit")
			for k := range p {
				i := (len(p)/2 + k) % len(p)
				c := p[i]
				switch {
				case c >= '0' && c <= '9':
					p[i] = '0' + (c-'0'+1)%10
				case c >= 'a' && c <= 'z':
					p[i] = c - 'a' + 'A'
				case c >= 'A' && c <= 'Z':
					p[i] = c - 'A' + 'a'
				default:
					continue
				}
				m["payload"] = b64(p)
				want, wantErr = json.Marshal(m)
				wantAt = i
				break
			}
		}
		if !bytes.Equal(got, want) || gotAt != wantAt || !sameErr(gotErr, wantErr) {
			t.Fatalf("alterPayload(%.80q) = %.80q, %d, %v; want %.80q, %d, %v", doc, got, gotAt, gotErr, want, wantAt, wantErr)
		}
	}
}

// BenchmarkFastJSON reads the valid vector's proof and its protected header
// on the fast paths, the JSON a signature check reads before ECDSA.
func BenchmarkFastJSON(b *testing.B) {
	doc, err := os.ReadFile(filepath.Join("testdata/vectors", "valid", "proof.json"))
	if err != nil {
		b.Fatal(err)
	}
	protected, _, _, ok := fastFlattened(doc)
	if !ok {
		b.Fatal("the proof does not take the fast path")
	}
	header, err := decodeB64(string(protected))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, ok := fastFlattened(doc); !ok {
			b.Fatal("flattened")
		}
		if _, ok := fastHeader(header); !ok {
			b.Fatal("header")
		}
	}
}
