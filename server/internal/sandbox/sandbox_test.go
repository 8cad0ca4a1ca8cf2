package sandbox_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/sandbox"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/verifier"
)

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

type env struct {
	st    *store.Store
	svc   *sandbox.Service
	clock *testserver.Clock
	dir   string
	url   string
}

// engines runs f against SQLite and a real PostgreSQL.
func engines(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newEnv(t, t.TempDir(), "")) })
	t.Run("postgres", func(t *testing.T) { f(t, newEnv(t, t.TempDir(), testpg.NewDatabase(t))) })
}

func newEnv(t *testing.T, dir, url string) *env {
	t.Helper()
	c := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	st, err := store.Open(context.Background(), dir, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{st: st, clock: c, dir: dir, url: url}
	e.svc = e.service(t)
	return e
}

func (e *env) service(t *testing.T) *sandbox.Service {
	t.Helper()
	keys, err := sandbox.LoadKeys(context.Background(), e.st, e.dir, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := sandbox.New(sandbox.Config{Store: e.st, Keys: keys, Now: e.clock.Now, BaseURL: func() string { return "http://pier.test" }})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// session is a session with a registered mandate and its holder.
type session struct {
	id, authz, reg string
	key            *holder.Key
}

func (e *env) session(t *testing.T) session {
	t.Helper()
	ctx := context.Background()
	c, err := e.svc.CreateSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := holder.GenerateKey()
	s := session{id: c.Session.Id, reg: c.RegistrationSecret, authz: c.AuthorizationHeader(), key: key}
	if _, err := e.svc.RegisterMandate(ctx, s.id, e.mandate(t, s), s.reg); err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) mandate(t *testing.T, s session) string {
	t.Helper()
	m, err := holder.NewMandate(s.id, e.svc.IssuerKID(), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	jws, err := holder.SignMandate(s.key, m)
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

func decision(t *testing.T, key *holder.Key, sessionID string, g *sdk.SandboxGate, outcome string) string {
	t.Helper()
	jws, err := holder.SignDecision(key, sessionID, holder.Gate{
		ID: g.Id, RequestDigest: g.RequestDigest, Nonce: g.Nonce, Outcome: string(g.Outcome), ExpiresAt: g.ExpiresAt,
	}, outcome)
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

// refused requires err to be an *apierr.Error with code.
func refused(t *testing.T, err error, code sdk.BlockedBy) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	if len(e.Actions) == 0 {
		t.Fatalf("%s carries no actions", code)
	}
}

func TestHolderFlowMintsAProof(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		c, err := e.svc.CreateSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Steps) < 1 || c.Session.State != "awaiting_mandate" || c.Session.MandateRegistered {
			t.Fatalf("created: %+v", c)
		}
		for _, a := range c.Steps {
			if kind, _ := a.Discriminator(); kind != "request" && kind != "stop" {
				t.Fatalf("session action of kind %q", kind)
			}
		}
		key, _ := holder.GenerateKey()
		s := session{id: c.Session.Id, reg: c.RegistrationSecret, authz: c.AuthorizationHeader(), key: key}

		// Attempts wait for the mandate.
		_, err = e.svc.Attempt(ctx, s.id, s.authz, "allowed")
		refused(t, err, "conflict:state")

		m, err := e.svc.RegisterMandate(ctx, s.id, e.mandate(t, s), s.reg)
		if err != nil {
			t.Fatal(err)
		}
		if m.BudgetRemaining != 100_000_000 || m.Mandate.HolderKeyThumbprint != key.Thumbprint() || m.Mandate.IssuerKid != e.svc.IssuerKID() {
			t.Fatalf("mandate: %+v", m)
		}
		// Approval first: a decided gate alone proves nothing yet.
		ap, err := e.svc.Attempt(ctx, s.id, s.authz, "approval")
		if err != nil {
			t.Fatal(err)
		}
		if ap.Gate == nil || ap.Attempt.Outcome != "gated" || ap.BudgetRemaining != 80_000_000 {
			t.Fatalf("approval: %+v", ap)
		}
		d, err := e.svc.Decide(ctx, s.id, ap.Gate.Id, decision(t, key, s.id, ap.Gate, holder.Approve))
		if err != nil {
			t.Fatal(err)
		}
		if d.ProofID != "" || d.Gate.State != "decided" || *d.Gate.DecidedOutcome != "approved" {
			t.Fatalf("decision: %+v", d)
		}
		al, err := e.svc.Attempt(ctx, s.id, s.authz, "allowed")
		if err != nil {
			t.Fatal(err)
		}
		if al.Gate != nil || al.Attempt.Outcome != "charged" || al.BudgetRemaining != 75_000_000 || al.ProofID == "" {
			t.Fatalf("allowed: %+v", al)
		}
		if !sandboxproof.ProofIDPattern().MatchString(al.ProofID) {
			t.Fatalf("proof id %q", al.ProofID)
		}

		proof, _, err := e.svc.Proof(ctx, al.ProofID)
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ Payload string }
		if err := json.Unmarshal(proof, &p); err != nil || p.Payload == "" {
			t.Fatalf("proof: %s", proof)
		}
		v, _, err := e.svc.Session(ctx, s.id)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != "proven" || *v.ProofId != al.ProofID || len(v.Attempts) != 2 || len(v.Gates) != 1 || *v.BudgetRemainingUsd != 75 {
			t.Fatalf("session: %+v", v)
		}
		// A proven session takes no more attempts.
		_, err = e.svc.Attempt(ctx, s.id, s.authz, "allowed")
		refused(t, err, "conflict:state")
	})
}

func TestAttemptNeedsThisSessionsCapability(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		a, b := e.session(t), e.session(t)
		for name, header := range map[string]string{
			"none":                   "",
			"another session's":      b.authz,
			"an API key":             "Bearer agk_" + a.authz[len("Bearer sbx_"):],
			"the bare capability":    a.authz[len("Bearer "):],
			"another scheme":         "Basic " + a.authz[len("Bearer "):],
			"a truncated capability": a.authz[:len(a.authz)-1],
		} {
			_, err := e.svc.Attempt(ctx, a.id, header, "allowed")
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Code != "auth:invalid_credentials" {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, err := e.svc.Attempt(ctx, a.id, "bearer "+a.authz[len("Bearer "):], "allowed"); err != nil {
			t.Errorf("scheme is case-insensitive: %v", err)
		}
		_, err := e.svc.Attempt(ctx, "sbs_nosuchsession0000000000", a.authz, "allowed")
		refused(t, err, "not_found:resource")
	})
}

func TestMandateRules(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.session(t)
		_, err := e.svc.RegisterMandate(ctx, s.id, e.mandate(t, s), s.reg)
		refused(t, err, "conflict:state")

		c, _ := e.svc.CreateSession(ctx)
		other := session{id: c.Session.Id, reg: c.RegistrationSecret, key: s.key}
		// Without this session's registration secret, nothing registers.
		for _, secret := range []string{"", s.reg, "sbr_guess"} {
			_, err = e.svc.RegisterMandate(ctx, other.id, e.mandate(t, other), secret)
			refused(t, err, "auth:invalid_credentials")
		}
		// A mandate signed for another session.
		_, err = e.svc.RegisterMandate(ctx, other.id, e.mandate(t, s), other.reg)
		refused(t, err, "input:signed_mismatch")
		// Naming another audience than the issuer key.
		m, _ := holder.NewMandate(other.id, "not-the-issuer", e.clock.Now())
		jws, _ := holder.SignMandate(s.key, m)
		_, err = e.svc.RegisterMandate(ctx, other.id, jws, other.reg)
		refused(t, err, "input:signed_mismatch")
		// A broken signature.
		good := e.mandate(t, other)
		bad := good[:len(good)-4] + "AAAA"
		if bad == good {
			bad = good[:len(good)-4] + "BBBB"
		}
		_, err = e.svc.RegisterMandate(ctx, other.id, bad, other.reg)
		refused(t, err, "auth:invalid_signature")
		_, err = e.svc.RegisterMandate(ctx, other.id, "not a jws", other.reg)
		refused(t, err, "input:invalid")
		// An expired one.
		m, _ = holder.NewMandate(other.id, e.svc.IssuerKID(), e.clock.Now().Add(-2*time.Hour))
		jws, _ = holder.SignMandate(s.key, m)
		_, err = e.svc.RegisterMandate(ctx, other.id, jws, other.reg)
		refused(t, err, "conflict:expired")

		// Of concurrent registrations exactly one wins.
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := 0; i < 8; i++ {
			key, _ := holder.GenerateKey()
			jws := e.mandate(t, session{id: other.id, key: key})
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.svc.RegisterMandate(ctx, other.id, jws, other.reg); err == nil {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d registrations won", won)
		}
	})
}

// TestNeverOverspend races more attempts than the mandate covers: the
// check-and-debit runs under the session's lock, so exactly as many succeed
// as fit in 100 USD.
func TestNeverOverspend(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.session(t)
		// Four approvals hold 80 USD; then 5 USD allowed attempts race for
		// the remaining 20.
		for i := 0; i < 4; i++ {
			if _, err := e.svc.Attempt(ctx, s.id, s.authz, "approval"); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, broke := 0, 0
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.svc.Attempt(ctx, s.id, s.authz, "allowed")
				mu.Lock()
				defer mu.Unlock()
				var ae *apierr.Error
				switch {
				case err == nil:
					ok++
				case errors.As(err, &ae) && ae.Code == "budget:insufficient":
					broke++
				default:
					t.Errorf("attempt: %v", err)
				}
			}()
		}
		wg.Wait()
		if ok != 4 || broke != 8 {
			t.Fatalf("%d charged, %d refused; want 4 and 8", ok, broke)
		}
		v, _, _ := e.svc.Session(ctx, s.id)
		if *v.BudgetRemainingUsd != 0 {
			t.Fatalf("remaining %v", *v.BudgetRemainingUsd)
		}
		_, err := e.svc.Attempt(ctx, s.id, s.authz, "approval")
		refused(t, err, "budget:insufficient")
	})
}

func TestGateDecisionsAreCompareAndSet(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.session(t)
		ap, err := e.svc.Attempt(ctx, s.id, s.authz, "approval")
		if err != nil {
			t.Fatal(err)
		}
		// Concurrent decisions, approvals and denials alike: one wins.
		decisions := []string{}
		for i := 0; i < 6; i++ {
			outcome := holder.Approve
			if i%2 == 1 {
				outcome = holder.Deny
			}
			decisions = append(decisions, decision(t, s.key, s.id, ap.Gate, outcome))
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := []string{}, 0
		for _, d := range decisions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.svc.Decide(ctx, s.id, ap.Gate.Id, d)
				mu.Lock()
				defer mu.Unlock()
				var ae *apierr.Error
				switch {
				case err == nil:
					won = append(won, d)
				case errors.As(err, &ae) && ae.Code == "conflict:gate_decided":
					lost++
				default:
					t.Errorf("decide: %v", err)
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 || lost != 5 {
			t.Fatalf("%d won, %d lost", len(won), lost)
		}
		// The winning signature replayed is refused as well.
		_, err = e.svc.Decide(ctx, s.id, ap.Gate.Id, won[0])
		refused(t, err, "conflict:gate_decided")

		// A decision signed for one gate, posted to another.
		ap2, _ := e.svc.Attempt(ctx, s.id, s.authz, "approval")
		_, err = e.svc.Decide(ctx, s.id, ap2.Gate.Id, won[0])
		refused(t, err, "input:signed_mismatch")
		// A decision by a key other than the mandate's.
		stranger, _ := holder.GenerateKey()
		_, err = e.svc.Decide(ctx, s.id, ap2.Gate.Id, decision(t, stranger, s.id, ap2.Gate, holder.Approve))
		refused(t, err, "auth:invalid_signature")
		// An unknown gate.
		_, err = e.svc.Decide(ctx, s.id, "sbg_nosuchgate000000000000", won[0])
		refused(t, err, "not_found:resource")
	})
}

func TestExpiredGatesAndDenialsReleaseTheMandate(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.session(t)
		a1, _ := e.svc.Attempt(ctx, s.id, s.authz, "approval")
		a2, _ := e.svc.Attempt(ctx, s.id, s.authz, "approval")
		if a2.BudgetRemaining != 60_000_000 {
			t.Fatalf("remaining %d", a2.BudgetRemaining)
		}
		d, err := e.svc.Decide(ctx, s.id, a1.Gate.Id, decision(t, s.key, s.id, a1.Gate, holder.Deny))
		if err != nil {
			t.Fatal(err)
		}
		if d.Released != 20_000_000 || d.BudgetRemaining != 80_000_000 {
			t.Fatalf("denial: %+v", d)
		}
		// Decided within the gate's last second is in time.
		e.clock.Advance(sandboxproof.DefaultGateTTL + 999*time.Millisecond)
		late := decision(t, s.key, s.id, a2.Gate, holder.Approve)
		e.clock.Advance(time.Millisecond)
		_, err = e.svc.Decide(ctx, s.id, a2.Gate.Id, late)
		refused(t, err, "conflict:expired")
		v, _, _ := e.svc.Session(ctx, s.id)
		if v.Gates[1].State != "expired" || *v.BudgetRemainingUsd != 100 {
			t.Fatalf("after expiry: %+v remaining %v", v.Gates[1], *v.BudgetRemainingUsd)
		}
		al, err := e.svc.Attempt(ctx, s.id, s.authz, "allowed")
		if err != nil {
			t.Fatal(err)
		}
		// The denied gate counts as decided, so the session is proven; the
		// approval whose gate expired undecided is left out of the proof.
		if al.BudgetRemaining != 95_000_000 || al.ProofID == "" {
			t.Fatalf("allowed: %+v", al)
		}
		proof, _, _ := e.svc.Proof(ctx, al.ProofID)
		var p struct{ Payload string }
		json.Unmarshal(proof, &p)
		payload := decodeSegment(t, p.Payload)
		var body struct {
			Attempts []struct{ AttemptID string }
			Gates    []struct{ ID, DecidedOutcome string }
		}
		if err := json.Unmarshal(payload, &body); err != nil {
			t.Fatal(err)
		}
		if len(body.Attempts) != 2 || body.Attempts[0].AttemptID != a1.Attempt.AttemptId || len(body.Gates) != 1 || body.Gates[0].DecidedOutcome != "denied" {
			t.Fatalf("proof payload: %s", payload)
		}
	})
}

func TestAttemptsStopWhenTheMandateExpires(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		s := e.session(t)
		e.clock.Advance(holder.MandateLifetime)
		_, err := e.svc.Attempt(context.Background(), s.id, s.authz, "allowed")
		refused(t, err, "conflict:expired")
		v, _, _ := e.svc.Session(context.Background(), s.id)
		if v.State != "expired" {
			t.Fatalf("state %s", v.State)
		}
	})
}

func TestReferenceRelease(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m, err := e.svc.ReferenceFile(ctx, sandboxproof.PathManifest)
		if err != nil {
			t.Fatal(err)
		}
		var pending map[string]any
		json.Unmarshal(m.Body, &pending)
		if pending["state"] != "pending" || pending["verification"].(map[string]any)["holderCliSha256"] == nil {
			t.Fatalf("pending manifest: %s", m.Body)
		}
		if _, err := e.svc.ReferenceFile(ctx, sandboxproof.PathProof); err == nil {
			t.Fatal("proof.json served before a release")
		}
		if f, err := e.svc.ReferenceFile(ctx, sandboxproof.PathHolderMJS); err != nil || f.ContentType != "text/javascript; charset=utf-8" {
			t.Fatalf("holder script while pending: %v", err)
		}

		pub, err := e.svc.PublishReference(ctx, sandbox.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !pub.Created {
			t.Fatal("first publication not created")
		}
		files := referenceFiles(t, e)
		proof, acts, err := e.svc.Proof(ctx, pub.ProofID)
		if err != nil {
			t.Fatal(err)
		}
		files.APIResponse, _ = sandbox.ProofEnvelope(proof, acts)
		if r := verifier.VerifyFiles(files, true); r.Verdict != verifier.Accept {
			t.Fatalf("release rejected at %+v", r.Failed())
		}
		var prov map[string]any
		json.Unmarshal(files.Provenance, &prov)
		if prov["kind"] != "unsigned-observation" || prov["proofId"] != pub.ProofID {
			t.Fatalf("provenance: %s", files.Provenance)
		}
		// The published issuer key is the one live sessions check mandates
		// against.
		var jwks struct{ Keys []struct{ Kid string } }
		json.Unmarshal(files.IssuerJWKS, &jwks)
		if jwks.Keys[0].Kid != e.svc.IssuerKID() {
			t.Fatal("published issuer key is not the live one")
		}

		// Immutable: publishing again keeps the release; a second service
		// (another process or replica) sees the same one.
		again, err := e.svc.PublishReference(ctx, sandbox.PublishOptions{})
		if err != nil || again.Created || again.ReleaseID != pub.ReleaseID {
			t.Fatalf("second publication: %+v %v", again, err)
		}
		if err := e.service(t).EnsureReference(ctx); err != nil {
			t.Fatal(err)
		}
		if m, _ := e.service(t).ReferenceFile(ctx, sandboxproof.PathManifest); string(m.Body) != string(pub.Manifest) {
			t.Fatal("another service serves another manifest")
		}
		replaced, err := e.svc.PublishReference(ctx, sandbox.PublishOptions{Replace: true})
		if err != nil || !replaced.Created || replaced.ReleaseID == pub.ReleaseID {
			t.Fatalf("replace: %+v %v", replaced, err)
		}
		if m, _ := e.svc.ReferenceFile(ctx, sandboxproof.PathManifest); string(m.Body) != string(replaced.Manifest) {
			t.Fatal("the replaced release is still served")
		}
	})
}

// referenceFiles reads each file of the published release, wanting each
// to match the hash recorded for it.
func referenceFiles(t *testing.T, e *env) verifier.Files {
	t.Helper()
	ctx := context.Background()
	files := verifier.Files{}
	for path, dst := range map[string]*[]byte{
		sandboxproof.PathManifest: &files.Manifest, sandboxproof.PathProof: &files.Proof, sandboxproof.PathProofJWKS: &files.ProofJWKS,
		sandboxproof.PathIssuerJWKS: &files.IssuerJWKS, sandboxproof.PathProvenance: &files.Provenance,
		sandboxproof.PathVerifierMJS: &files.VerifierMJS, sandboxproof.PathHolderMJS: &files.HolderMJS,
	} {
		f, err := e.svc.ReferenceFile(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if sandboxproof.SHA256Hex(f.Body) != f.SHA256 {
			t.Fatalf("%s: recorded hash differs", path)
		}
		*dst = f.Body
	}
	return files
}

func TestKeys(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		a, err := sandbox.LoadKeys(ctx, e.st, e.dir, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		b, err := sandbox.LoadKeys(ctx, e.st, e.dir, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if a.Issuer.KID != b.Issuer.KID || a.Proof.KID != b.Proof.KID || a.Issuer.KID == a.Proof.KID {
			t.Fatal("keys are not stable and distinct")
		}
		path := filepath.Join(e.dir, "sandbox", "issuer-key.jwk")
		if e.url != "" {
			if _, err := os.Stat(path); err == nil {
				t.Fatal("PostgreSQL keys written to the data directory")
			}
			// Replicas share one database, and so one set of keys.
			c, err := sandbox.LoadKeys(ctx, e.st, t.TempDir(), e.clock.Now())
			if err != nil || c.Issuer.KID != a.Issuer.KID {
				t.Fatalf("another replica's keys: %v", err)
			}
			return
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file: %v %v", fi, err)
		}
		os.Chmod(path, 0o644)
		if _, err := sandbox.LoadKeys(ctx, e.st, e.dir, e.clock.Now()); err == nil {
			t.Fatal("a key file others can read was accepted")
		}
	})
}

func decodeSegment(t *testing.T, s string) []byte {
	t.Helper()
	b, err := jsonB64(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonB64(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
