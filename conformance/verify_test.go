package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/sdk"
)

func strp(s string) *string { return &s }

// sample builds a valid v2 report without a server.
func sample(start time.Time, prev *string) *Report {
	probe := func(id, status string) sdk.ConformanceProbe {
		ms, code := 3, 200
		return sdk.ConformanceProbe{Id: id, Status: sdk.ConformanceProbeStatus(status), LatencyMs: &ms, HttpStatus: &code, Spec: strp("SPEC.md §2.2")}
	}
	suites := []sdk.ConformanceSuite{
		{Id: SuiteWire, Required: true, Probes: []sdk.ConformanceProbe{probe("wire.a", Pass), probe("wire.b", Skip)}},
		{Id: SuiteDiscovery, Required: true, Probes: []sdk.ConformanceProbe{probe("discovery.a", Pass)}},
		{Id: SuiteGoverned, Required: false, Probes: []sdk.ConformanceProbe{{Id: "governed.a", Status: NotRun}}},
	}
	for i := range suites {
		suites[i].Outcome = SuiteOutcome(suites[i].Probes)
	}
	return &Report{
		SchemaVersion: SchemaV2, Profile: ProfileAnonymous, RunId: "local:test:" + start.Format("150405.000"),
		Runner:    runnerInfo(func(string) string { return "" }),
		Target:    sdk.ConformanceTarget{BaseUrl: "http://127.0.0.1:8080", BuildId: "test", SpecDigest: strings.Repeat("a", 64), SchemaDigest: strings.Repeat("b", 64)},
		StartedAt: start, CompletedAt: start.Add(time.Second), Suites: suites, Summary: Summarize(suites), PreviousDigest: prev,
	}
}

func write(t *testing.T, dir, name string, k *holder.Key, r *Report) (string, string) {
	t.Helper()
	raw, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := Digest(raw)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := Sign(k, digest)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	os.WriteFile(path, raw, 0o644)
	os.WriteFile(SignaturePath(path), []byte(sig), 0o644)
	return path, digest
}

func code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return "untyped: " + err.Error()
}

func TestSummaryRules(t *testing.T) {
	r := sample(time.Now().UTC(), nil)
	if s := r.Summary; s.Passed != 2 || s.Failed != 0 || s.Skipped != 2 || s.Outcome != Pass {
		t.Fatalf("summary %+v, want 2 passed, 2 skipped (skip and not_run), pass", s)
	}
	if r.Suites[2].Outcome != NotRun {
		t.Errorf("a suite of not_run probes reads %s", r.Suites[2].Outcome)
	}
	r.Suites[1].Probes[0].Status = Fail
	r.Suites[1].Outcome = SuiteOutcome(r.Suites[1].Probes)
	if s := Summarize(r.Suites); s.Outcome != Fail || s.Failed != 1 {
		t.Errorf("a failed required suite: %+v", s)
	}
	r.Suites[2].Required = true
	r.Suites[1].Probes[0].Status = Pass
	r.Suites[1].Outcome = Pass
	if s := Summarize(r.Suites); s.Outcome != Fail {
		t.Errorf("a required suite that did not run must fail the run: %+v", s)
	}
}

func TestVerifyRefusesTampering(t *testing.T) {
	k, _ := holder.GenerateKey()
	dir := t.TempDir()
	path, _ := write(t, dir, "r.json", k, sample(time.Now().UTC(), nil))
	if v, err := VerifyFile(path, nil); err != nil || v.Signer.KID != k.Thumbprint() {
		t.Fatalf("a good report: %v", err)
	}
	raw, _ := os.ReadFile(path)
	sig, _ := os.ReadFile(SignaturePath(path))

	// Reformatting is not tampering: the digest is over the canonical form.
	var m map[string]any
	json.Unmarshal(raw, &m)
	compact, _ := json.Marshal(m)
	if _, err := VerifyReport(compact, string(sig), nil); err != nil {
		t.Fatalf("a reformatted report: %v", err)
	}

	cases := map[string]struct {
		edit func(m map[string]any)
		want string
	}{
		"a changed probe":   {func(m map[string]any) { m["target"].(map[string]any)["buildId"] = "other" }, CodeSignature},
		"an extra member":   {func(m map[string]any) { m["suites"].([]any)[0].(map[string]any)["note"] = "x" }, CodeSchema},
		"a top-level extra": {func(m map[string]any) { m["signature"] = "x" }, CodeSchema},
		"a flattered summary": {func(m map[string]any) {
			p := m["suites"].([]any)[1].(map[string]any)["probes"].([]any)[0].(map[string]any)
			p["status"] = "fail"
			m["suites"].([]any)[1].(map[string]any)["outcome"] = "fail"
		}, CodeSummary},
		"a fourth suite":     {func(m map[string]any) { m["suites"] = append(m["suites"].([]any), m["suites"].([]any)[0]) }, CodeSchema},
		"an unknown version": {func(m map[string]any) { m["schemaVersion"] = "service.conformance.run.v9" }, CodeSchema},
	}
	for name, c := range cases {
		var m map[string]any
		json.Unmarshal(raw, &m)
		c.edit(m)
		b, _ := json.Marshal(m)
		if _, err := VerifyReport(b, string(sig), nil); err == nil || code(err) != c.want {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}

	// A v1 report validates against the v1 schema.
	json.Unmarshal(raw, &m)
	m["schemaVersion"] = SchemaV1
	v1, _ := json.Marshal(m)
	if err := Validate(v1); err != nil {
		t.Errorf("v1 report: %v", err)
	}
}

func TestVerifySignatureRules(t *testing.T) {
	k, _ := holder.GenerateKey()
	other, _ := holder.GenerateKey()
	digest := strings.Repeat("c", 64)
	sig, _ := Sign(k, digest)

	if _, err := VerifySignature(sig, strings.Repeat("d", 64), nil); code(err) != CodeSignature {
		t.Errorf("another digest: %v", err)
	}
	// A trusted set picks the key by kid; a set without it refuses.
	set := func(keys ...*holder.Key) *jose.JSONWebKeySet {
		s := &jose.JSONWebKeySet{}
		for _, k := range keys {
			j := k.PublicJWK()
			j.KeyID = k.Thumbprint()
			s.Keys = append(s.Keys, j)
		}
		return s
	}
	if s, err := VerifySignature(sig, digest, set(other, k)); err != nil || !s.Trusted {
		t.Errorf("trusted set holding the key: %v", err)
	}
	if _, err := VerifySignature(sig, digest, set(other)); code(err) != CodeSignature {
		t.Errorf("trusted set without the key: %v", err)
	}
	// Another key's signature under this kid fails.
	forged, _ := Sign(other, digest)
	parts := strings.Split(forged, ".")
	mine := strings.Split(sig, ".")
	if _, err := VerifySignature(mine[0]+".."+parts[2], digest, nil); code(err) != CodeSignature {
		t.Errorf("a signature by another key: %v", err)
	}
	// Only ES256: an HS256 JWS over the digest is refused.
	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, (&jose.SignerOptions{}).WithType(SignatureType).WithHeader("kid", k.Thumbprint()))
	obj, _ := hs.Sign([]byte(digest))
	hsSig, _ := obj.DetachedCompactSerialize()
	if _, err := VerifySignature(hsSig, digest, nil); code(err) != CodeSignature {
		t.Errorf("HS256: %v", err)
	}
	// An attached payload is not a detached signature.
	if _, err := VerifySignature(mine[0]+".ZGF0YQ."+mine[2], digest, nil); code(err) != CodeSignature {
		t.Errorf("attached payload: %v", err)
	}
}

func TestVerifyChain(t *testing.T) {
	k, _ := holder.GenerateKey()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	build := func(t *testing.T) (string, []string, []string) {
		dir := t.TempDir()
		var paths, digests []string
		var prev *string
		for i := range 3 {
			p, d := write(t, dir, "run"+string(rune('a'+i))+".json", k, sample(t0.Add(time.Duration(i)*time.Hour), prev))
			paths, digests = append(paths, p), append(digests, d)
			prev = strp(d)
		}
		return dir, paths, digests
	}
	dir, _, _ := build(t)
	if chain, err := VerifyChain(dir, nil); err != nil || len(chain) != 3 {
		t.Fatalf("a good chain: %v", err)
	}

	// A gap: the middle report is gone.
	dir, paths, _ := build(t)
	os.Remove(paths[1])
	os.Remove(SignaturePath(paths[1]))
	if _, err := VerifyChain(dir, nil); code(err) != CodeChainGap {
		t.Errorf("gap: %v", err)
	}

	// Reordering: the third report claims to follow the first.
	dir, paths, digests := build(t)
	write(t, dir, filepath.Base(paths[2]), k, sample(t0.Add(2*time.Hour), strp(digests[0])))
	if _, err := VerifyChain(dir, nil); code(err) != CodeChainOrder {
		t.Errorf("reordered: %v", err)
	}

	// A second chain head.
	dir, paths, _ = build(t)
	write(t, dir, filepath.Base(paths[2]), k, sample(t0.Add(2*time.Hour), nil))
	if _, err := VerifyChain(dir, nil); code(err) != CodeChainOrder {
		t.Errorf("second head: %v", err)
	}

	// A tampered member of the chain.
	dir, paths, _ = build(t)
	raw, _ := os.ReadFile(paths[1])
	os.WriteFile(paths[1], []byte(strings.Replace(string(raw), `"buildId": "test"`, `"buildId": "tset"`, 1)), 0o644)
	if _, err := VerifyChain(dir, nil); code(err) != CodeSignature {
		t.Errorf("tampered member: %v", err)
	}
}

func TestRunnerFromCIEnvironment(t *testing.T) {
	env := map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "pierhq/pier", "GITHUB_SERVER_URL": "https://github.com",
		"GITHUB_WORKFLOW_REF": "pierhq/pier/.github/workflows/public-conformance.yml@refs/heads/main",
		"GITHUB_RUN_ID":       "42", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_SHA": strings.Repeat("f", 40),
	}
	r := runnerInfo(func(k string) string { return env[k] })
	if r.Kind != "hosted-actions" || r.Repository != "pierhq/pier" || r.RunUrl != "https://github.com/pierhq/pier/actions/runs/42" ||
		r.RunAttempt != 2 || r.CommitSha != env["GITHUB_SHA"] || r.WorkflowRef != env["GITHUB_WORKFLOW_REF"] || r.Workflow != "public-conformance.yml" {
		t.Errorf("runner %+v", r)
	}
	id := runID(func(k string) string { return env[k] }, time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC))
	if id != "gha:42:2:20261125T010203Z" {
		t.Errorf("run id %q", id)
	}
	if local := runnerInfo(func(string) string { return "" }); local.Kind != "local" || local.RunAttempt != 1 {
		t.Errorf("local runner %+v", local)
	}
}

// TestVerifyStrangerIsUntrusted: an edited report re-signed with a fresh
// key passes every check that needs no trust, so without a key set the
// signer is only the signature's own jwk: RequireTrusted refuses it. With
// the auditor's key set the same report is refused outright.
func TestVerifyStrangerIsUntrusted(t *testing.T) {
	owner, _ := holder.GenerateKey()
	stranger, _ := holder.GenerateKey()
	dir := t.TempDir()
	r := sample(time.Now().UTC(), nil)
	r.Target.BuildId = "edited"
	path, _ := write(t, dir, "r.json", stranger, r)

	v, err := VerifyFile(path, nil)
	if err != nil {
		t.Fatalf("the stranger's report fails a check that needs no trust: %v", err)
	}
	if v.Signer.Trusted || v.Signer.KID != stranger.Thumbprint() {
		t.Fatalf("signer %+v, want the stranger's thumbprint, untrusted", v.Signer)
	}
	if err := RequireTrusted([]*Verified{v}); code(err) != CodeSignerUntrusted {
		t.Errorf("RequireTrusted of a key the signature carried: %v, want %s", err, CodeSignerUntrusted)
	}
	if _, err := VerifyFile(path, PublicKeySet(owner)); code(err) != CodeSignature {
		t.Errorf("under the owner's key set: %v, want %s", err, CodeSignature)
	}
	v, err = VerifyFile(path, PublicKeySet(stranger))
	if err != nil || RequireTrusted([]*Verified{v}) != nil {
		t.Errorf("under a set holding the signer: %v", err)
	}
}

// TestKeySetFromURL: --keys may name the https URL (or a loopback http
// one) where the signer publishes its JWKS; any other plain http URL, an
// error status and a private key are refused.
func TestKeySetFromURL(t *testing.T) {
	k, _ := holder.GenerateKey()
	pub, _ := json.Marshal(PublicKeySet(k))
	privJWK, _ := k.MarshalJWK()
	priv := []byte(`{"keys":[` + string(privJWK) + `]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/jwks.json":
			w.Write(pub)
		case "/private.json":
			w.Write(priv)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := t.Context()
	set, err := ReadKeySet(ctx, srv.Client(), srv.URL+"/jwks.json")
	if err != nil || len(set.Key(k.Thumbprint())) != 1 {
		t.Fatalf("published key set: %v", err)
	}
	for _, bad := range []string{srv.URL + "/missing.json", srv.URL + "/private.json", "http://example.com/jwks.json"} {
		if _, err := ReadKeySet(ctx, srv.Client(), bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	os.WriteFile(file, pub, 0o644)
	if set, err := ReadKeySet(ctx, nil, file); err != nil || len(set.Keys) != 1 {
		t.Errorf("key set file: %v", err)
	}
}

// TestVerifyChainAnchor: a chain with its newest report removed still
// forms one chain, so only an anchor from outside it catches that: the
// newest digest (--head) or the count (--count). No anchor is refused.
func TestVerifyChainAnchor(t *testing.T) {
	k, _ := holder.GenerateKey()
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	var paths, digests []string
	var prev *string
	for i := range 3 {
		p, d := write(t, dir, fmt.Sprintf("run%d.json", i), k, sample(t0.Add(time.Duration(i)*time.Hour), prev))
		paths, digests, prev = append(paths, p), append(digests, d), strp(d)
	}
	chain, err := VerifyChain(dir, PublicKeySet(k))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []Anchor{{Head: digests[2]}, {Count: 3}, {Head: digests[2], Count: 3}} {
		if err := a.Check(chain); err != nil {
			t.Errorf("anchor %+v on the whole chain: %v", a, err)
		}
	}
	if err := (Anchor{}).Check(chain); code(err) != CodeChainUnanchored {
		t.Errorf("no anchor: %v, want %s", err, CodeChainUnanchored)
	}

	os.Remove(paths[2])
	os.Remove(SignaturePath(paths[2]))
	chain, err = VerifyChain(dir, PublicKeySet(k))
	if err != nil {
		t.Fatalf("the chain without its newest report no longer verifies at all: %v", err)
	}
	for _, a := range []Anchor{{Head: digests[2]}, {Count: 3}} {
		if err := a.Check(chain); code(err) != CodeChainHead {
			t.Errorf("anchor %+v with the newest report dropped: %v, want %s", a, err, CodeChainHead)
		}
	}
	if err := (Anchor{Head: digests[0]}).Check(chain); code(err) != CodeChainHead || !strings.Contains(err.Error(), "1 report(s) follow it") {
		t.Errorf("a head that reports follow: %v", err)
	}
}

// TestGovernedProbesRecordHolder: every governed probe records the holder
// it acts as; the sandbox mandate flow's is simulated, and a report whose
// only holder is simulated never supports the human-separation claim,
// however its probes went.
func TestGovernedProbesRecordHolder(t *testing.T) {
	suite := notRunSuite(SuiteGoverned, governedProbes)
	for i, p := range suite.Probes {
		suite.Probes[i].Status = Pass
		want := HolderNone
		if p.Id == "governed.sandbox-mandate" {
			want = HolderSimulated
		}
		if got := ProbeHolder(p); got != want {
			t.Errorf("%s records holder %q, want %q", p.Id, got, want)
		}
	}
	suite.Outcome = SuiteOutcome(suite.Probes)
	suite.Required = true

	k, _ := holder.GenerateKey()
	r := sample(time.Now().UTC(), nil)
	r.Profile = ProfileGoverned
	r.Suites[2] = suite
	r.Summary = Summarize(r.Suites)
	path, _ := write(t, t.TempDir(), "governed.json", k, r)
	v, err := VerifyFile(path, PublicKeySet(k))
	if err != nil {
		t.Fatal(err)
	}
	if v.HumanSeparation {
		t.Errorf("a report whose holder was simulated supports human separation")
	}
	if v.Holders["governed.sandbox-mandate"] != HolderSimulated || v.Holders["governed.quote-hold"] != HolderNone {
		t.Errorf("holders %v", v.Holders)
	}

	human := strp("SPEC.md §5" + holderNote(HolderHuman))
	simulated := strp("SPEC.md §5" + holderNote(HolderSimulated))
	for _, c := range []struct {
		probes []sdk.ConformanceProbe
		want   bool
	}{
		{[]sdk.ConformanceProbe{{Id: "governed.x", Status: Pass, Spec: simulated}}, false},
		{[]sdk.ConformanceProbe{{Id: "governed.x", Status: Pass, Spec: human}}, true},
		{[]sdk.ConformanceProbe{{Id: "governed.x", Status: Fail, Spec: human}, {Id: "governed.y", Status: Pass, Spec: simulated}}, false},
	} {
		if got := HumanSeparation([]sdk.ConformanceSuite{{Id: SuiteGoverned, Probes: c.probes}}); got != c.want {
			t.Errorf("HumanSeparation(%+v) = %v, want %v", c.probes, got, c.want)
		}
	}
}
