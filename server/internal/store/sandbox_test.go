package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// mandated is a session with a registered mandate of budget.
func (w world) mandated(t *testing.T, id string, budget money.MicroUSD) store.SandboxSession {
	t.Helper()
	sb := w.st.Sandbox()
	must(t, sb.CreateSession(ctx, store.SandboxSession{ID: id, CapabilityHash: "cap_" + id, RegistrationHash: "reg_" + id, CreatedAt: t0}))
	s := store.SandboxSession{ID: id, MandateJWS: "jws", MandateSHA256: "sha_" + id, HolderThumbprint: "thumb", IssuerKID: "kid", MandateExpiresAt: t0.Add(time.Hour), BudgetMicro: budget}
	if ok, err := sb.RegisterMandate(ctx, s); !ok || err != nil {
		t.Fatalf("register %v, %v", ok, err)
	}
	got, err := sb.Session(ctx, id)
	must(t, err)
	return got
}

// spend is one attempt as the sandbox makes it: in the session's lock,
// check what is left, record the attempt, commit its amount.
func spend(w world, id string, amount money.MicroUSD, gate bool) error {
	return w.st.Sandbox().InSession(ctx, id, func(tx *store.SandboxTx, s *store.SandboxSession) error {
		if s.CommittedMicro+amount > s.BudgetMicro {
			return errNoRoom
		}
		seq := s.AttemptCount + 1
		a := store.SandboxAttempt{ID: id + "_att_" + string(rune('0'+seq)), SessionID: id, Seq: seq, Scenario: "allowed", AmountMicro: amount, RequestDigest: "d", Outcome: "charged", Receipt: "r", CreatedAt: t0}
		var g *store.SandboxGate
		if gate {
			a.Scenario, a.Outcome = "approval", "gated"
			g = &store.SandboxGate{ID: id + "_gate_" + string(rune('0'+seq)), SessionID: id, AttemptID: a.ID, Seq: seq, RequestDigest: "d", Nonce: a.ID, ExpiresText: "soon", ExpiresAt: t0.Add(time.Minute)}
		}
		if err := tx.InsertAttempt(ctx, a, g); err != nil {
			return err
		}
		return tx.SetBudget(ctx, id, s.CommittedMicro+amount, seq)
	})
}

func TestSandbox(t *testing.T) { runCases(t, sandboxCases) }

// sandboxCases are TestSandbox's cases, each run on every engine.
var sandboxCases = []storeCase{
	{"a session's mandate is registered once", func(t *testing.T, w world) {
		sb := w.st.Sandbox()
		_, err := sb.Session(ctx, "ses_1")
		wantErr(t, "unknown session", err, store.ErrNotFound)
		must(t, sb.CreateSession(ctx, store.SandboxSession{ID: "ses_1", CapabilityHash: "cap", RegistrationHash: "reg", Reference: true, CreatedAt: t0}))
		got, err := sb.Session(ctx, "ses_1")
		if err != nil || !got.Reference || got.MandateJWS != "" || !got.MandateExpiresAt.IsZero() || got.RegistrationHash != "reg" || !got.CreatedAt.Equal(t0) {
			t.Fatalf("session %+v, %v", got, err)
		}
		var won [6]bool
		race(t, len(won), func(i int) error {
			ok, err := sb.RegisterMandate(ctx, store.SandboxSession{ID: "ses_1", MandateJWS: "jws_" + string(rune('a'+i)), MandateExpiresAt: t0.Add(time.Hour), BudgetMicro: 100})
			won[i] = ok
			return err
		})
		if n := len(slices.DeleteFunc(won[:], func(b bool) bool { return !b })); n != 1 {
			t.Fatalf("%d mandates registered", n)
		}
		if ok, err := sb.RegisterMandate(ctx, store.SandboxSession{ID: "ses_none", MandateJWS: "x"}); ok || err != nil {
			t.Fatalf("registered on no session: %v, %v", ok, err)
		}
		got, _ = sb.Session(ctx, "ses_1")
		if got.MandateJWS == "" || got.BudgetMicro != 100 || !got.MandateExpiresAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("after registration %+v", got)
		}
	}},
	{"concurrent attempts never overspend the mandate", func(t *testing.T, w world) {
		w.mandated(t, "ses_1", 100)
		wins := race(t, 10, func(i int) error { return spend(w, "ses_1", 30, i%2 == 0) }, errNoRoom)
		got, _ := w.st.Sandbox().Session(ctx, "ses_1")
		attempts, _ := w.st.Sandbox().Attempts(ctx, "ses_1")
		if wins != 3 || got.CommittedMicro != 90 || got.AttemptCount != 3 || len(attempts) != 3 {
			t.Fatalf("%d attempts went through; session %+v; attempts %d", wins, got, len(attempts))
		}
		for i, a := range attempts {
			if a.Seq != i+1 {
				t.Fatalf("attempts out of order %+v", attempts)
			}
		}
		// Past the check the caller made, the table refuses.
		err := w.st.Sandbox().InSession(ctx, "ses_1", func(tx *store.SandboxTx, s *store.SandboxSession) error {
			return tx.SetBudget(ctx, "ses_1", 101, s.AttemptCount)
		})
		wantErr(t, "committed past the mandate", err, store.ErrBudget)
	}},
	{"gates: decided once, expired in the lock", func(t *testing.T, w world) {
		w.mandated(t, "ses_1", 100)
		must(t, spend(w, "ses_1", 10, true))
		must(t, spend(w, "ses_1", 20, true))
		must(t, spend(w, "ses_1", 5, false))
		sb := w.st.Sandbox()
		gates, err := sb.Gates(ctx, "ses_1")
		if err != nil || len(gates) != 2 || gates[0].State != store.GateOpen || gates[0].DecidedAt != (time.Time{}) || !gates[0].ExpiresAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("gates %+v, %v", gates, err)
		}
		g1, g2 := gates[0], gates[1]
		if got, err := sb.Gate(ctx, "ses_1", g2.ID); err != nil || got != g2 {
			t.Fatalf("gate %+v, %v", got, err)
		}
		_, err = sb.Gate(ctx, "ses_other", g2.ID)
		wantErr(t, "another session's gate", err, store.ErrNotFound)
		decide := func(g store.SandboxGate, at time.Time, outcome string) (bool, error) {
			var ok bool
			err := sb.InSession(ctx, "ses_1", func(tx *store.SandboxTx, s *store.SandboxSession) error {
				g.DecisionJWS, g.DecisionSHA256, g.DecidedOutcome, g.DecidedAt = "dec_"+outcome, "sha_"+g.ID+outcome, outcome, at
				var err error
				ok, err = tx.DecideGate(ctx, g)
				return err
			})
			return ok, err
		}
		var won [4]bool
		race(t, len(won), func(i int) error {
			var err error
			won[i], err = decide(g1, t0.Add(30*time.Second), []string{"approved", "denied"}[i%2])
			return err
		})
		if n := len(slices.DeleteFunc(won[:], func(b bool) bool { return !b })); n != 1 {
			t.Fatalf("a gate decided %d times", n)
		}
		if ok, err := decide(g2, t0.Add(2*time.Minute), "approved"); ok || err != nil {
			t.Fatalf("decided after expiry: %v, %v", ok, err)
		}
		// Expiring in the lock hands back what the open gates held.
		var held money.MicroUSD
		must(t, sb.InSession(ctx, "ses_1", func(tx *store.SandboxTx, s *store.SandboxSession) error {
			var err error
			if held, err = tx.ExpireGates(ctx, "ses_1", t0.Add(2*time.Minute)); err != nil {
				return err
			}
			if gs, err := tx.Gates(ctx, "ses_1"); err != nil || gs[1].State != store.GateExpired || gs[0].State != store.GateDecided {
				t.Errorf("gates in the lock %+v, %v", gs, err)
			}
			if as, err := tx.Attempts(ctx, "ses_1"); err != nil || len(as) != 3 {
				t.Errorf("attempts in the lock %+v, %v", as, err)
			}
			return tx.SetBudget(ctx, "ses_1", s.CommittedMicro-held, s.AttemptCount)
		}))
		if held != 20 {
			t.Fatalf("expired gates held %d", held)
		}
		got, _ := sb.Gate(ctx, "ses_1", g1.ID)
		if got.State != store.GateDecided || got.DecisionJWS == "" || !got.DecidedAt.Equal(t0.Add(30*time.Second)) {
			t.Fatalf("decided gate %+v", got)
		}
		if s, _ := sb.Session(ctx, "ses_1"); s.CommittedMicro != 15 {
			t.Fatalf("committed %d after expiry", s.CommittedMicro)
		}
	}},
	{"one proof a session", func(t *testing.T, w world) {
		sb := w.st.Sandbox()
		w.mandated(t, "ses_1", 100)
		_, err := sb.Proof(ctx, "prf_1")
		wantErr(t, "no proof yet", err, store.ErrNotFound)
		must(t, sb.InSession(ctx, "ses_1", func(tx *store.SandboxTx, s *store.SandboxSession) error {
			return tx.InsertProof(ctx, "ses_1", "prf_1", []byte("{proof}"), t0)
		}))
		if b, err := sb.Proof(ctx, "prf_1"); err != nil || string(b) != "{proof}" {
			t.Fatalf("proof %q, %v", b, err)
		}
		if s, _ := sb.Session(ctx, "ses_1"); s.ProofID != "prf_1" {
			t.Fatalf("session's proof %q", s.ProofID)
		}
		err = sb.InSession(ctx, "ses_1", func(tx *store.SandboxTx, s *store.SandboxSession) error {
			return tx.InsertProof(ctx, "ses_1", "prf_2", []byte("again"), t0)
		})
		if err == nil {
			t.Fatal("a second proof for one session")
		}
		if _, err := sb.Proof(ctx, "prf_2"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused proof was kept: %v", err)
		}
	}},
	{"the session lock", func(t *testing.T, w world) {
		sb := w.st.Sandbox()
		err := sb.InSession(ctx, "ses_none", func(*store.SandboxTx, *store.SandboxSession) error { return nil })
		wantErr(t, "unknown session", err, store.ErrNotFound)
		w.mandated(t, "ses_1", 100)
		boom := errors.New("boom")
		err = sb.InSession(ctx, "ses_1", func(tx *store.SandboxTx, s *store.SandboxSession) error {
			if err := tx.SetBudget(ctx, "ses_1", 50, 1); err != nil {
				return err
			}
			return boom
		})
		wantErr(t, "rolled back", err, boom)
		if s, _ := sb.Session(ctx, "ses_1"); s.CommittedMicro != 0 {
			t.Fatalf("a failed transaction committed %d", s.CommittedMicro)
		}
		err = w.st.InTx(ctx, func(tx *store.Tx) error {
			return tx.Sandbox().InSession(ctx, "ses_1", func(*store.SandboxTx, *store.SandboxSession) error { return nil })
		})
		if err == nil {
			t.Fatal("the session's own transaction ran inside another")
		}
	}},
}

// release is a sandbox release named id, with two files.
func release(id string) store.SandboxRelease {
	return store.SandboxRelease{ID: id, ProofID: "prf_" + id, Manifest: []byte(`{"m":"` + id + `"}`), CreatedAt: t0, Files: []store.SandboxReleaseFile{
		{Path: "index.html", ContentType: "text/html", SHA256: "h_" + id, Body: []byte("<p>" + id)},
		{Path: "a.json", ContentType: "application/json", SHA256: "j_" + id, Body: []byte("{}")},
	}}
}

// want is the files of release(id), by path to hash.
func want(id string) map[string]string {
	return map[string]string{"index.html": "h_" + id, "a.json": "j_" + id}
}

func TestSandboxReleases(t *testing.T) { runCases(t, sandboxReleasesCases) }

// sandboxReleasesCases are TestSandboxReleases's cases, each run on every engine.
var sandboxReleasesCases = []storeCase{
	{"keys: of racing replicas, one key", func(t *testing.T, w world) {
		rel := w.st.SandboxReleases()
		_, err := rel.Key(ctx, "issuer")
		wantErr(t, "no key", err, store.ErrNotFound)
		race(t, 6, func(i int) error { return rel.PutKeyIfAbsent(ctx, "issuer", "jwk_"+string(rune('a'+i)), t0) })
		first, err := rel.Key(ctx, "issuer")
		must(t, err)
		must(t, rel.PutKeyIfAbsent(ctx, "issuer", "jwk_later", t0))
		if k, _ := rel.Key(ctx, "issuer"); k != first || len(k) != 5 {
			t.Fatalf("key %q, first %q", k, first)
		}
	}},
	{"write, publish, read, delete", func(t *testing.T, w world) {
		rel := w.st.SandboxReleases()
		_, err := rel.Current(ctx)
		wantErr(t, "nothing published", err, store.ErrNotFound)
		_, err = rel.Get(ctx, "rel_a")
		wantErr(t, "unknown release", err, store.ErrNotFound)
		must(t, rel.Write(ctx, release("rel_a")))
		must(t, rel.Write(ctx, release("rel_a"))) // again: nothing changes
		got, err := rel.Get(ctx, "rel_a")
		if err != nil || len(got.Files) != 2 || got.Files[0].Path != "a.json" || string(got.Files[1].Body) != "<p>rel_a" || string(got.Manifest) != `{"m":"rel_a"}` || got.ProofID != "prf_rel_a" {
			t.Fatalf("release %+v, %v", got, err)
		}
		if _, err := rel.Publish(ctx, "rel_a", map[string]string{"index.html": "h_other"}, false, t0); err == nil {
			t.Fatal("published with a file not in place")
		}
		if _, err := rel.Publish(ctx, "rel_none", nil, false, t0); err == nil {
			t.Fatal("published a release with no manifest")
		}
		if id, err := rel.Publish(ctx, "rel_a", want("rel_a"), false, t0); err != nil || id != "rel_a" {
			t.Fatalf("publish %s, %v", id, err)
		}
		must(t, rel.Write(ctx, release("rel_b")))
		// Without replace the publication stands.
		if id, err := rel.Publish(ctx, "rel_b", want("rel_b"), false, t0); err != nil || id != "rel_a" {
			t.Fatalf("publish without replace %s, %v", id, err)
		}
		if err := rel.Delete(ctx, "rel_a"); err == nil {
			t.Fatal("the published release was deleted")
		}
		if id, err := rel.Publish(ctx, "rel_b", want("rel_b"), true, t0); err != nil || id != "rel_b" {
			t.Fatalf("publish with replace %s, %v", id, err)
		}
		if id, err := rel.Current(ctx); err != nil || id != "rel_b" {
			t.Fatalf("current %s, %v", id, err)
		}
		must(t, rel.Delete(ctx, "rel_a"))
		_, err = rel.Get(ctx, "rel_a")
		wantErr(t, "deleted release", err, store.ErrNotFound)
		err = w.st.InTx(ctx, func(tx *store.Tx) error { return tx.SandboxReleases().Write(ctx, release("rel_c")) })
		if err == nil {
			t.Fatal("a release write ran inside another transaction")
		}
	}},
	{"replicas publishing at once: one release", func(t *testing.T, w world) {
		rel := w.st.SandboxReleases()
		ids := []string{"rel_a", "rel_b", "rel_c", "rel_d"}
		for _, id := range ids {
			must(t, rel.Write(ctx, release(id)))
		}
		published := make([]string, len(ids))
		race(t, len(ids), func(i int) error {
			var err error
			published[i], err = rel.Publish(ctx, ids[i], want(ids[i]), false, t0)
			return err
		})
		current, _ := rel.Current(ctx)
		for _, id := range published {
			if id != current {
				t.Fatalf("replicas told %v, current %s", published, current)
			}
		}
		// The losers clear up theirs.
		for _, id := range ids {
			if id != current {
				must(t, rel.Delete(ctx, id))
			}
		}
	}},
}
