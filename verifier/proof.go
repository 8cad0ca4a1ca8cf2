package verifier

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// proofDoc is a proof payload that passed the shape checks of
// docs/sandbox-proof.md §4.
type proofDoc struct {
	proofID, sessionID, issuedAt, mandate string
	attempts                              []attemptDoc
	gates                                 []gateDoc
}

type attemptDoc struct {
	attemptID, scenario, currency, requestDigest, outcome, receipt string
	amount                                                         amount
}

type gateDoc struct {
	id, attemptID, requestDigest, nonce, outcome, expiresAt string
	decision, decidedAt, decidedOutcome                     string
}

type mandateDoc struct {
	aud        string
	exp        int64
	thumbprint string
	cents      int64
}

// checkSignatures runs checks 11 to 27 on a release whose bytes are already
// trusted to be the published ones.
func checkSignatures(r *Report, rel *release) bool {
	proofKeys, err := parseJWKS(rel.proofJWKS)
	if !r.record(CheckJWKSProof, err, keysDetail(proofKeys)) {
		return false
	}
	issuerKeys, err := parseJWKS(rel.issuerJWKS)
	if !r.record(CheckJWKSIssuer, err, keysDetail(issuerKeys)) {
		return false
	}
	if !rel.minted && !r.record(CheckProvenance, checkProvenance(rel.provenance, rel.proofID), "an unsigned observation for "+rel.proofID) {
		return false
	}

	proof, err := verifyFlattened(&r.Timing, rel.proof, typProof, byKID(proofKeys, "proof JWKS"))
	if !r.record(CheckProofSignature, err, fmt.Sprintf("signed by proof key %s", kidOf(proof))) {
		return false
	}
	p, err := parseProofPayload(proof.payload, rel.proofID)
	if !r.record(CheckProofPayload, err, fmt.Sprintf("%d attempt(s), %d gate(s)", len(p.attempts), len(p.gates))) {
		return false
	}

	mandateJWS, err := verifyCompact(&r.Timing, p.mandate, typMandate, "jwk", byEmbeddedJWK)
	var holder string
	if err == nil {
		holder = thumbprint(mandateJWS.key)
	}
	if !r.record(CheckMandateSig, err, "signed by holder key "+holder) {
		return false
	}
	mandate, err := checkMandateClaims(mandateJWS.payload, p, issuerKeys)
	if !r.record(CheckMandateClaims, err, "open mandate for 100 fake USD, audience "+mandate.aud) {
		return false
	}
	mandate.thumbprint = holder

	receipts, ok := checkAttempts(r, p, mandate, issuerKeys)
	if !ok || !checkGates(r, p, mandate, receipts) {
		return false
	}
	if !r.record(CheckGatesUnique, checkGatesUnique(p), "every gate and decision is used once") {
		return false
	}
	spent, err := checkSpend(p, mandate)
	if !r.record(CheckMandateSpend, err, fmt.Sprintf("%s of 100 fake USD spent", centsText(spent))) {
		return false
	}
	if rel.minted {
		// A proof of one's own session proves what it holds; covering both
		// scenarios is the reference release's promise.
		return true
	}
	return r.record(CheckProofCoverage, checkCoverage(p), "an allowed attempt and a decided gate")
}

// checkAttempts checks each attempt's request digest and receipt, signed by
// the issuer key the mandate names, and returns the receipts' claims.
func checkAttempts(r *Report, p *proofDoc, mandate mandateDoc, issuerKeys *keySet) ([]object, bool) {
	mandateSum := sha256.Sum256([]byte(p.mandate))
	receipts := make([]object, len(p.attempts))
	for i, a := range p.attempts {
		label := fmt.Sprintf("attempt %d (%s): ", i, a.attemptID)
		if !r.record(CheckRequestDigest, prefix(label, checkRequestDigest(a, p.sessionID, hex.EncodeToString(mandateSum[:]))), label+"digest recomputed") {
			return nil, false
		}
		receipt, err := verifyCompact(&r.Timing, a.receipt, typReceipt, "kid", byKID(issuerKeys, "issuer JWKS"))
		if err == nil && receipt.header["kid"] != mandate.aud {
			err = fmt.Errorf("receipt signed by issuer key %s but the mandate's audience is %q", jsonText(receipt.header["kid"]), mandate.aud)
		}
		if !r.record(CheckReceiptSig, prefix(label, err), label+"signed by issuer key "+mandate.aud) {
			return nil, false
		}
		receipts[i], err = checkReceiptClaims(receipt.payload, a, p.sessionID, mandate)
		if !r.record(CheckReceiptClaims, prefix(label, err), label+a.outcome) {
			return nil, false
		}
	}
	return receipts, true
}

// checkGates checks each gate was opened by an approval attempt, decided by
// the mandate's holder for this gate, and before it expired.
func checkGates(r *Report, p *proofDoc, mandate mandateDoc, receipts []object) bool {
	for j, g := range p.gates {
		label := fmt.Sprintf("gate %d (%s): ", j, g.id)
		if !r.record(CheckGateAttempt, prefix(label, checkGateAttempt(g, p.attempts, receipts)), label+"opened by attempt "+g.attemptID) {
			return false
		}
		decision, err := verifyCompact(&r.Timing, g.decision, typDecision, "jwk", byEmbeddedJWK)
		if err == nil && thumbprint(decision.key) != mandate.thumbprint {
			err = fmt.Errorf("decision signed by holder key %s, not the mandate's %s", thumbprint(decision.key), mandate.thumbprint)
		}
		if !r.record(CheckDecisionSig, prefix(label, err), label+"signed by the mandate's holder key") {
			return false
		}
		if !r.record(CheckDecisionBinding, prefix(label, checkDecisionBinding(decision.payload, g, p.sessionID)), label+g.decidedOutcome) {
			return false
		}
		err = nil
		if g.decidedAt > g.expiresAt { // same-format UTC timestamps order as strings
			err = fmt.Errorf("decided at %s, after the gate expired at %s", g.decidedAt, g.expiresAt)
		}
		if !r.record(CheckGateExpiry, prefix(label, err), label+"decided at "+g.decidedAt+", before "+g.expiresAt) {
			return false
		}
	}
	return true
}

func keysDetail(s *keySet) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("%d key(s): %v", len(s.kids), s.kids)
}

func kidOf(s *signed) string {
	if s == nil {
		return ""
	}
	kid, _ := s.header["kid"].(string)
	return kid
}

func prefix(label string, err error) error {
	if err == nil {
		return nil
	}
	return errors.New(label + err.Error())
}

func checkProvenance(b []byte, proofID string) error {
	doc, err := parseObject(b)
	if err != nil {
		return err
	}
	if err := exactly(doc, []string{"version", "kind", "proofId", "observedAt", "build"}); err != nil {
		return err
	}
	if err := getConst(doc, "version", "v1"); err != nil {
		return err
	}
	if err := getConst(doc, "kind", "unsigned-observation"); err != nil {
		return err
	}
	if doc["proofId"] != proofID {
		return fmt.Errorf("provenance names proof %s, not %s", jsonText(doc["proofId"]), proofID)
	}
	if _, err := getTimestamp(doc, "observedAt"); err != nil {
		return err
	}
	_, err = getObject(doc, "build")
	return err
}

func parseProofPayload(b []byte, proofID string) (*proofDoc, error) {
	doc, err := parseObject(b)
	if err != nil {
		return &proofDoc{}, err
	}
	p := &proofDoc{}
	if err := exactly(doc, []string{"version", "proofId", "sessionId", "issuedAt", "mandate", "attempts", "gates"}); err != nil {
		return p, err
	}
	if err := getConst(doc, "version", "v1"); err != nil {
		return p, err
	}
	if p.proofID, err = getMatch(doc, "proofId", proofIDPattern); err != nil {
		return p, err
	}
	if p.proofID != proofID {
		return p, fmt.Errorf("the proof is %s but the manifest names %s", p.proofID, proofID)
	}
	if p.sessionID, err = getMatch(doc, "sessionId", idPattern); err != nil {
		return p, err
	}
	if p.issuedAt, err = getTimestamp(doc, "issuedAt"); err != nil {
		return p, err
	}
	if p.mandate, err = getString(doc, "mandate"); err != nil {
		return p, err
	}
	attempts, ok := doc["attempts"].([]any)
	if !ok || len(attempts) < 1 || len(attempts) > 32 {
		return p, errors.New(`"attempts" must be an array of 1 to 32 entries`)
	}
	gates, ok := doc["gates"].([]any)
	if !ok || len(gates) > 32 {
		return p, errors.New(`"gates" must be an array of at most 32 entries`)
	}
	seen := map[string]bool{}
	for i, v := range attempts {
		a, err := parseAttempt(v)
		if err != nil {
			return p, fmt.Errorf("attempt %d: %v", i, err)
		}
		if seen[a.attemptID] {
			return p, fmt.Errorf("attempt id %s appears twice", a.attemptID)
		}
		seen[a.attemptID] = true
		p.attempts = append(p.attempts, a)
	}
	for i, v := range gates {
		g, err := parseGate(v)
		if err != nil {
			return p, fmt.Errorf("gate %d: %v", i, err)
		}
		p.gates = append(p.gates, g)
	}
	return p, nil
}

func parseAttempt(v any) (a attemptDoc, err error) {
	m, ok := v.(object)
	if !ok {
		return a, errors.New("not an object")
	}
	if err = exactly(m, []string{"attemptId", "scenario", "amountUsd", "currency", "requestDigest", "outcome", "receipt"}); err != nil {
		return a, err
	}
	if a.attemptID, err = getMatch(m, "attemptId", idPattern); err != nil {
		return a, err
	}
	a.scenario, _ = m["scenario"].(string)
	a.outcome, _ = m["outcome"].(string)
	if !(a.scenario == "allowed" && a.outcome == "charged") && !(a.scenario == "approval" && a.outcome == "gated") {
		return a, fmt.Errorf("scenario %s with outcome %s: want allowed/charged or approval/gated", jsonText(m["scenario"]), jsonText(m["outcome"]))
	}
	if a.amount, err = getAmount(m, "amountUsd"); err != nil {
		return a, err
	}
	if err = getConst(m, "currency", "USD"); err != nil {
		return a, err
	}
	a.currency = "USD"
	if a.requestDigest, err = getMatch(m, "requestDigest", hexPattern); err != nil {
		return a, err
	}
	a.receipt, err = getString(m, "receipt")
	return a, err
}

func parseGate(v any) (g gateDoc, err error) {
	m, ok := v.(object)
	if !ok {
		return g, errors.New("not an object")
	}
	if err = exactly(m, []string{"id", "attemptId", "requestDigest", "nonce", "outcome", "expiresAt", "decision", "decidedAt", "decidedOutcome"}); err != nil {
		return g, err
	}
	if g.id, err = getMatch(m, "id", idPattern); err != nil {
		return g, err
	}
	if g.attemptID, err = getMatch(m, "attemptId", idPattern); err != nil {
		return g, err
	}
	if g.requestDigest, err = getMatch(m, "requestDigest", hexPattern); err != nil {
		return g, err
	}
	if g.nonce, err = getMatch(m, "nonce", noncePattern); err != nil {
		return g, err
	}
	if err = getConst(m, "outcome", "approved"); err != nil {
		return g, err
	}
	g.outcome = "approved"
	if g.expiresAt, err = getTimestamp(m, "expiresAt"); err != nil {
		return g, err
	}
	if g.decision, err = getString(m, "decision"); err != nil {
		return g, err
	}
	if g.decidedAt, err = getTimestamp(m, "decidedAt"); err != nil {
		return g, err
	}
	g.decidedOutcome, _ = m["decidedOutcome"].(string)
	if g.decidedOutcome != "approved" && g.decidedOutcome != "denied" {
		return g, errors.New(`"decidedOutcome" must be "approved" or "denied"`)
	}
	return g, nil
}

func checkMandateClaims(b []byte, p *proofDoc, issuerKeys *keySet) (mandateDoc, error) {
	var md mandateDoc
	m, err := parseObject(b)
	if err != nil {
		return md, err
	}
	if err := exactly(m, []string{"kind", "amountUsd", "currency", "fake", "sessionId", "aud", "iat", "exp", "nonce"}); err != nil {
		return md, err
	}
	for _, c := range []struct {
		name string
		want any
	}{{"kind", "open"}, {"amountUsd", float64(100)}, {"currency", "USD"}, {"fake", true}} {
		if err := getConst(m, c.name, c.want); err != nil {
			return md, err
		}
	}
	md.cents = 100 * 100
	if m["sessionId"] != p.sessionID {
		return md, fmt.Errorf("mandate names session %s, the proof %s", jsonText(m["sessionId"]), p.sessionID)
	}
	if md.aud, err = getString(m, "aud"); err != nil {
		return md, err
	}
	if _, ok := issuerKeys.keys[md.aud]; !ok {
		return md, fmt.Errorf("audience %q is not a kid in the issuer JWKS", md.aud)
	}
	iat, err := getNumericDate(m, "iat")
	if err != nil {
		return md, err
	}
	if md.exp, err = getNumericDate(m, "exp"); err != nil {
		return md, err
	}
	if md.exp <= iat || md.exp-iat > 86400 {
		return md, errors.New("exp must follow iat by at most 86400 seconds")
	}
	if _, err := getMatch(m, "nonce", noncePattern); err != nil {
		return md, err
	}
	return md, nil
}

// checkRequestDigest recomputes §3.2's digest. Every string in it matched
// a pattern without characters JSON would escape, so concatenation is the
// canonical (RFC 8785) form.
func checkRequestDigest(a attemptDoc, sessionID, mandateSha256 string) error {
	canonical := `{"amountUsd":` + a.amount.text +
		`,"attemptId":"` + a.attemptID +
		`","currency":"USD","kind":"pier.sandbox.attempt.v1","mandateSha256":"` + mandateSha256 +
		`","scenario":"` + a.scenario +
		`","sessionId":"` + sessionID + `"}`
	sum := sha256.Sum256([]byte(canonical))
	if got := hex.EncodeToString(sum[:]); got != a.requestDigest {
		return fmt.Errorf("requestDigest is %s but the attempt hashes to %s", a.requestDigest, got)
	}
	return nil
}

func checkReceiptClaims(b []byte, a attemptDoc, sessionID string, mandate mandateDoc) (object, error) {
	m, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	required := []string{"sessionId", "attemptId", "scenario", "amountUsd", "currency", "fake", "requestDigest", "outcome", "iat"}
	if a.outcome == "gated" {
		required = append(required, "gateId")
	}
	if err := exactly(m, required); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		want any
	}{
		{"sessionId", sessionID}, {"attemptId", a.attemptID}, {"scenario", a.scenario},
		{"amountUsd", a.amount.value}, {"currency", "USD"}, {"fake", true},
		{"requestDigest", a.requestDigest}, {"outcome", a.outcome},
	} {
		if m[c.name] != c.want {
			return nil, fmt.Errorf("receipt %s is %s, the attempt says %s", c.name, jsonText(m[c.name]), jsonText(c.want))
		}
	}
	if a.outcome == "gated" {
		if _, err := getMatch(m, "gateId", idPattern); err != nil {
			return nil, err
		}
	}
	iat, err := getNumericDate(m, "iat")
	if err != nil {
		return nil, err
	}
	if iat > mandate.exp {
		return nil, fmt.Errorf("receipt issued at %d, after the mandate expired at %d", iat, mandate.exp)
	}
	return m, nil
}

func checkGateAttempt(g gateDoc, attempts []attemptDoc, receipts []object) error {
	for i, a := range attempts {
		if a.attemptID != g.attemptID {
			continue
		}
		if a.scenario != "approval" {
			return fmt.Errorf("attempt %s is %s, not an approval", a.attemptID, a.scenario)
		}
		if a.requestDigest != g.requestDigest {
			return fmt.Errorf("gate digest %s differs from attempt digest %s", g.requestDigest, a.requestDigest)
		}
		if receipts[i]["gateId"] != g.id {
			return fmt.Errorf("the attempt's receipt names gate %s", jsonText(receipts[i]["gateId"]))
		}
		return nil
	}
	return fmt.Errorf("no attempt %s in the proof", g.attemptID)
}

func checkDecisionBinding(b []byte, g gateDoc, sessionID string) error {
	m, err := parseObject(b)
	if err != nil {
		return err
	}
	if err := exactly(m, []string{"sessionId", "gateId", "requestDigest", "nonce", "outcome", "expiresAt"}); err != nil {
		return err
	}
	for _, c := range []struct{ name, want string }{
		{"sessionId", sessionID}, {"gateId", g.id}, {"requestDigest", g.requestDigest},
		{"nonce", g.nonce}, {"expiresAt", g.expiresAt},
	} {
		if m[c.name] != c.want {
			return fmt.Errorf("decision %s is %s, the gate's is %q", c.name, jsonText(m[c.name]), c.want)
		}
	}
	outcome := m["outcome"]
	if outcome != "approved" && outcome != "denied" {
		return fmt.Errorf("decision outcome %s is neither \"approved\" nor \"denied\"", jsonText(outcome))
	}
	if outcome != g.decidedOutcome {
		return fmt.Errorf("decision says %s but the proof records %q", jsonText(outcome), g.decidedOutcome)
	}
	return nil
}

func checkGatesUnique(p *proofDoc) error {
	ids, nonces, decisions, perAttempt := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]int{}
	for _, g := range p.gates {
		switch {
		case ids[g.id]:
			return fmt.Errorf("gate %s appears twice", g.id)
		case nonces[g.nonce]:
			return fmt.Errorf("nonce %s is used by two gates", g.nonce)
		case decisions[g.decision]:
			return fmt.Errorf("gate %s reuses another gate's decision", g.id)
		}
		ids[g.id], nonces[g.nonce], decisions[g.decision] = true, true, true
		perAttempt[g.attemptID]++
	}
	for _, a := range p.attempts {
		if a.scenario == "approval" && perAttempt[a.attemptID] != 1 {
			return fmt.Errorf("approval attempt %s has %d gates, want 1", a.attemptID, perAttempt[a.attemptID])
		}
	}
	return nil
}

// checkSpend adds, in cents, what the mandate paid for: every charged
// attempt and every approval the holder approved.
func checkSpend(p *proofDoc, mandate mandateDoc) (int64, error) {
	approved := map[string]bool{}
	for _, g := range p.gates {
		if g.decidedOutcome == "approved" {
			approved[g.attemptID] = true
		}
	}
	var spent int64
	for _, a := range p.attempts {
		if a.outcome == "charged" || approved[a.attemptID] {
			spent += a.amount.cents
		}
	}
	if spent > mandate.cents {
		return spent, fmt.Errorf("%s fake USD spent under a mandate of 100", centsText(spent))
	}
	return spent, nil
}

func checkCoverage(p *proofDoc) error {
	for _, a := range p.attempts {
		if a.scenario == "allowed" && len(p.gates) > 0 {
			return nil
		}
	}
	return errors.New("a proof needs an allowed attempt and a decided gate")
}

func centsText(c int64) string {
	return fmt.Sprintf("%d.%02d", c/100, c%100)
}
