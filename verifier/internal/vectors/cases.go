package vectors

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
)

type vectorCase struct {
	name   string
	expect Expect
	build  func(*Keys) (*release, error)
}

func accept(reason string) Expect { return Expect{Verdict: "accept", Reason: reason} }

func reject(check, reason string) Expect {
	return Expect{Verdict: "reject", FailedCheck: check, Reason: reason}
}

// editPayload mints the base scenario, lets edit change the decoded proof
// payload, and re-signs it with the genuine proof key.
func editPayload(edit func(s *scenario, p map[string]any)) func(*Keys) (*release, error) {
	return func(k *Keys) (*release, error) {
		s, err := newScenario(k, baseAttempts)
		if err != nil {
			return nil, err
		}
		rel, err := s.mint()
		if err != nil {
			return nil, err
		}
		p := proofPayload(rel.proof)
		edit(s, p)
		return s.wrap(s.resign(p))
	}
}

// editRelease mints the base scenario and lets edit change the release files.
func editRelease(specs []attemptSpec, edit func(s *scenario, r *release)) func(*Keys) (*release, error) {
	return func(k *Keys) (*release, error) {
		s, err := newScenario(k, specs)
		if err != nil {
			return nil, err
		}
		rel, err := s.mint()
		if err != nil {
			return nil, err
		}
		edit(s, rel)
		return rel, nil
	}
}

func attemptAt(p map[string]any, i int) map[string]any {
	return p["attempts"].([]any)[i].(map[string]any)
}

func gateAt(p map[string]any, i int) map[string]any {
	return p["gates"].([]any)[i].(map[string]any)
}

// reuseSignature swaps a compact JWS's payload and keeps its old signature.
func reuseSignature(compact string, edit func(claims map[string]any)) string {
	protected, claims, sig := jwsParts(compact)
	edit(claims)
	return protected + "." + jsonB64(claims) + "." + sig
}

// cases are the vectors, in the order they are written, by group.
func cases() []vectorCase {
	return slices.Concat(validCases(), tamperedCases(), signatureCases(), manifestCases(), bindingCases(), jwksCases())
}

// validCases are the proofs a verifier accepts.
func validCases() []vectorCase {
	return []vectorCase{
		{"valid", accept("a proof minted by the reference code"),
			editRelease(baseAttempts, func(*scenario, *release) {})},

		{"valid-decision-denied", accept("the holder denied the gate; a denial is a valid decision"),
			editRelease([]attemptSpec{baseAttempts[0], {"sba_approval01", sandboxproof.ScenarioApproval, sandboxproof.ApprovalAmountMicroUSD, sandboxproof.DecisionDenied}},
				func(*scenario, *release) {})},

		{"valid-holder-cli-under-verification", accept("holderCliSha256 only under verification, which verifiers must read"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				m := manifestOf(r)
				m["verification"] = map[string]any{"holderCliSha256": m["holderCliSha256"]}
				delete(m, "holderCliSha256")
				r.manifest, _ = indent(m)
			})},
	}
}

// tamperedCases are content changed under an old signature, or served differently than signed.
func tamperedCases() []vectorCase {
	return []vectorCase{
		{"tampered-payload-byte", reject("proof.signature", "one byte of the signed proof payload changed"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				var flat map[string]string
				_ = json.Unmarshal(r.proof, &flat)
				raw, _ := base64.RawURLEncoding.DecodeString(flat["payload"])
				text := strings.Replace(string(raw), `"amountUsd":5,`, `"amountUsd":6,`, 1)
				flat["payload"] = b64([]byte(text))
				r.proof, _ = indent(flat)
			})},

		{"tampered-mandate", reject("mandate.signature", "mandate amount raised to 1000 under the holder's old signature"),
			editPayload(func(s *scenario, p map[string]any) {
				p["mandate"] = reuseSignature(p["mandate"].(string), func(c map[string]any) { c["amountUsd"] = 1000 })
			})},

		{"tampered-receipt", reject("receipt.signature", "receipt amount changed under the issuer's old signature"),
			editPayload(func(s *scenario, p map[string]any) {
				a := attemptAt(p, 0)
				a["receipt"] = reuseSignature(a["receipt"].(string), func(c map[string]any) { c["amountUsd"] = 1 })
			})},

		{"tampered-decision", reject("gate.decision.signature", "decision flipped to denied under the holder's old signature"),
			editPayload(func(s *scenario, p map[string]any) {
				g := gateAt(p, 0)
				g["decision"] = reuseSignature(g["decision"].(string), func(c map[string]any) { c["outcome"] = "denied" })
				g["decidedOutcome"] = "denied"
			})},

		{"api-proof-differs", reject("api.proof", "the API serves a different, validly signed proof than the static artifact"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				p := proofPayload(r.proof)
				p["issuedAt"] = sandboxproof.FormatTime(s.issuedAt.Add(1e9))
				var data any
				_ = json.Unmarshal(s.resign(p), &data)
				r.apiProof = envelope(data)
			})},
	}
}

// signatureCases are signatures by the wrong key, algorithm or encoding.
func signatureCases() []vectorCase {
	return []vectorCase{
		{"wrong-key", reject("proof.signature", "proof signed by a key that is not the published proof key, under its kid"),
			withPayload(func(s *scenario, r *release, p map[string]any) {
				header := map[string]any{"alg": "ES256", "kid": s.keys.Proof.KID, "typ": sandboxproof.TypProof}
				r.proof = flattened(header, p, func(in string) []byte { return rawSignature(s.keys.Rogue.Private, in) })
			})},

		{"wrong-holder-key", reject("gate.decision.signature", "decision validly signed, but by a holder key other than the mandate's"),
			editPayload(func(s *scenario, p map[string]any) {
				g := gateAt(p, 0)
				_, claims, _ := jwsParts(g["decision"].(string))
				g["decision"] = holderSign(s.keys.OtherHolder, sandboxproof.TypDecision, claims)
			})},

		{"alg-none", reject("proof.signature", `proof with alg "none" and an empty signature`),
			withPayload(func(s *scenario, r *release, p map[string]any) {
				header := map[string]any{"alg": "none", "kid": s.keys.Proof.KID, "typ": sandboxproof.TypProof}
				r.proof = flattened(header, p, func(string) []byte { return nil })
			})},

		{"hs256", reject("receipt.signature", "receipt MACed with HS256, keyed with the issuer's public JWKS (key confusion)"),
			editPayload(func(s *scenario, p map[string]any) {
				a := attemptAt(p, 0)
				_, claims, _ := jwsParts(a["receipt"].(string))
				jwks, _ := sandboxproof.PublicJWKS(s.keys.Issuer)
				protected := jsonB64(map[string]any{"alg": "HS256", "kid": s.keys.Issuer.KID, "typ": sandboxproof.TypReceipt})
				input := protected + "." + jsonB64(claims)
				a["receipt"] = input + "." + b64(hs256(jwks, input))
			})},

		{"der-signature", reject("mandate.signature", "mandate signature in ASN.1 DER instead of 64-byte R||S"),
			editPayload(func(s *scenario, p map[string]any) {
				parts := strings.Split(p["mandate"].(string), ".")
				input := parts[0] + "." + parts[1]
				p["mandate"] = input + "." + b64(derSignature(s.keys.Holder, input))
			})},

		{"short-signature", reject("proof.signature", "proof signature of 63 bytes"),
			withPayload(func(s *scenario, r *release, p map[string]any) {
				header := map[string]any{"alg": "ES256", "kid": s.keys.Proof.KID, "typ": sandboxproof.TypProof}
				r.proof = flattened(header, p, func(in string) []byte { return rawSignature(s.keys.Proof.Private, in)[:63] })
			})},

		{"non-canonical-base64", reject("proof.signature", "proof signature whose last base64url character differs only in unused bits"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				var flat map[string]string
				_ = json.Unmarshal(r.proof, &flat)
				sig := flat["signature"]
				// 64 bytes leave 4 unused bits in the 86th character, which are zero
				// when canonical; setting the lowest keeps the decoded bytes the same.
				const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
				last := strings.IndexByte(alphabet, sig[len(sig)-1])
				flat["signature"] = sig[:len(sig)-1] + string(alphabet[last|1])
				r.proof, _ = indent(flat)
			})},

		{"unknown-kid", reject("receipt.signature", "receipt signed by a key whose kid the issuer JWKS does not hold"),
			editPayload(func(s *scenario, p map[string]any) {
				a := attemptAt(p, 0)
				_, claims, _ := jwsParts(a["receipt"].(string))
				a["receipt"] = kidSign(s.keys.Rogue.Private, s.keys.Rogue.KID, sandboxproof.TypReceipt, claims)
			})},

		{"unknown-kid-proof", reject("proof.signature", "proof signed by a key whose kid the proof JWKS does not hold"),
			withPayload(func(s *scenario, r *release, p map[string]any) {
				header := map[string]any{"alg": "ES256", "kid": s.keys.Rogue.KID, "typ": sandboxproof.TypProof}
				r.proof = flattened(header, p, func(in string) []byte { return rawSignature(s.keys.Rogue.Private, in) })
			})},

		{"receipt-signed-by-proof-key", reject("receipt.signature", "receipt signed by the proof key: a real key, but from the wrong set"),
			editPayload(func(s *scenario, p map[string]any) {
				a := attemptAt(p, 0)
				_, claims, _ := jwsParts(a["receipt"].(string))
				a["receipt"] = kidSign(s.keys.Proof.Private, s.keys.Proof.KID, sandboxproof.TypReceipt, claims)
			})},
	}
}

// manifestCases are a manifest that does not describe the served release.
func manifestCases() []vectorCase {
	return []vectorCase{
		{"manifest-hash-mismatch", reject("hash.proofJwks", "manifest proofJwksSha256 does not match the served file"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				m := manifestOf(r)
				m["proofJwksSha256"] = sandboxproof.SHA256Hex([]byte("another file"))
				r.manifest, _ = indent(m)
			})},

		{"state-not-available", reject("manifest.state", "manifest still pending"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				r.manifest, _ = sandboxproof.PendingManifest(verifierJS, holderJS)
			})},

		{"proof-id-pattern", reject("manifest.proofId", "manifest proof id breaks ^sbp_[A-Za-z0-9_-]{20,32}$"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				m := manifestOf(r)
				m["proofId"] = "sbp_too.short"
				r.manifest, _ = indent(m)
			})},
	}
}

// bindingCases are validly signed parts that do not bind together: expiry, replay, audience, claims, digests and spend.
func bindingCases() []vectorCase {
	return []vectorCase{
		{"expired-gate", reject("gate.expiry", "the recorded decision time is after the gate's expiry"),
			editPayload(func(s *scenario, p map[string]any) {
				g := gateAt(p, 0)
				g["decidedAt"] = sandboxproof.FormatTime(s.gates[0].DecidedAt.Add(sandboxproof.DefaultGateTTL))
			})},

		{"replayed-decision", reject("gate.decision.binding", "the second gate carries the first gate's decision"),
			editRelease(append(baseAttempts[:2:2], attemptSpec{"sba_approval02", sandboxproof.ScenarioApproval, sandboxproof.ApprovalAmountMicroUSD, sandboxproof.DecisionApproved}),
				func(s *scenario, r *release) {
					s.gates[1].Decision = s.gates[0].Decision
					minted, err := s.mint()
					if err != nil {
						panic(err)
					}
					*r = *minted
				})},

		{"mandate-wrong-audience", reject("mandate.claims", "mandate validly signed but addressed to the proof key, not the issuer"),
			editPayload(func(s *scenario, p map[string]any) {
				p["mandate"] = holderSign(s.keys.Holder, sandboxproof.TypMandate, mandateClaims(s.keys.Proof.KID))
			})},

		{"mandate-unknown-member", reject("mandate.claims", `mandate validly signed but with an extra "AmountUsd" member`),
			editPayload(func(s *scenario, p map[string]any) {
				c := mandateClaims(s.keys.Issuer.KID)
				c["AmountUsd"] = 1000
				p["mandate"] = holderSign(s.keys.Holder, sandboxproof.TypMandate, c)
			})},

		{"request-digest-mismatch", reject("attempt.requestDigest", "attempt amount changed and receipt re-signed, but the digest is the old one"),
			editPayload(func(s *scenario, p map[string]any) {
				a := attemptAt(p, 0)
				a["amountUsd"] = 6
				_, claims, _ := jwsParts(a["receipt"].(string))
				claims["amountUsd"] = 6
				a["receipt"] = kidSign(s.keys.Issuer.Private, s.keys.Issuer.KID, sandboxproof.TypReceipt, claims)
			})},

		{"overspend", reject("mandate.spend", "a 90 USD charge and an approved 20 USD attempt exceed the 100 USD mandate"),
			editRelease([]attemptSpec{{"sba_allowed01", sandboxproof.ScenarioAllowed, 90_000_000, ""}, baseAttempts[1]},
				func(*scenario, *release) {})},
	}
}

// jwksCases are published key sets that are not public P-256 keys.
func jwksCases() []vectorCase {
	return []vectorCase{
		{"jwks-off-curve", reject("jwks.issuer", "the issuer key's y coordinate is altered, so x, y is not a point on P-256"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				var set map[string][]map[string]any
				_ = json.Unmarshal(r.issuerJWKS, &set)
				y, _ := base64.RawURLEncoding.DecodeString(set["keys"][0]["y"].(string))
				y[31] ^= 1
				set["keys"][0]["y"] = b64(y)
				r.issuerJWKS, _ = indent(set)
			})},

		{"jwks-private-key", reject("jwks.issuer", "the published issuer JWKS leaks the private key"),
			editRelease(baseAttempts, func(s *scenario, r *release) {
				private, _ := s.keys.Issuer.MarshalPrivateJWK()
				var key map[string]any
				_ = json.Unmarshal(private, &key)
				r.issuerJWKS, _ = indent(map[string]any{"keys": []any{key}})
			})},
	}
}

// withPayload mints the base scenario and hands step the decoded payload,
// for cases that re-sign the proof under a different header or key.
func withPayload(step func(s *scenario, r *release, p map[string]any)) func(*Keys) (*release, error) {
	return editRelease(baseAttempts, func(s *scenario, r *release) {
		step(s, r, proofPayload(r.proof))
	})
}

func manifestOf(r *release) map[string]any {
	if r.manifest == nil {
		if err := r.fillManifest(); err != nil {
			panic(err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(r.manifest, &m); err != nil {
		panic(err)
	}
	return m
}

func (r *release) fillManifest() error {
	m, err := (sandboxproof.Release{
		ProofID: proofID, Proof: r.proof, ProofJWKS: r.proofJWKS, IssuerJWKS: r.issuerJWKS,
		Provenance: r.provenance, VerifierMJS: verifierJS, HolderMJS: holderJS,
	}).Manifest()
	r.manifest = m
	return err
}
