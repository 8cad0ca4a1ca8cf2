package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/verifier"
)

// created is POST /v1/sandbox/sessions, checked against SPEC §2.9's exact
// shape.
// registrationSecrets holds each session's registration secret by id, as
// the session's creator would hand it to the holder.
var registrationSecrets sync.Map

func registrationOf(id string) string {
	v, _ := registrationSecrets.Load(id)
	s, _ := v.(string)
	return s
}

// mandateBody is what the holder posts to register a mandate.
func mandateBody(id, mandate string) map[string]string {
	return map[string]string{"mandate": mandate, "registrationSecret": registrationOf(id)}
}

func createSandboxSession(t *testing.T, c *contracttest.Client) (id, authz string) {
	t.Helper()
	r := c.Do("POST", "/v1/sandbox/sessions", nil, nil)
	if r.StatusCode != 201 {
		t.Fatalf("create: %d %s", r.StatusCode, r.Body)
	}
	env := r.JSON()
	if strings.Contains(string(r.Body), "nextActions") {
		t.Fatalf("nextActions present: %s", r.Body)
	}
	data := env["data"].(map[string]any)
	if got := keys(data); !reflect.DeepEqual(got, []string{"actions", "agentCapability", "authorizationHeader", "registrationSecret", "session"}) {
		t.Fatalf("data members %v", got)
	}
	for _, flat := range []string{"id", "budget"} {
		if _, ok := data[flat]; ok {
			t.Fatalf("flat alias data.%s", flat)
		}
	}
	acts := data["actions"].([]any)
	if len(acts) < 1 {
		t.Fatal("no data.actions")
	}
	for _, a := range acts {
		if k := a.(map[string]any)["kind"]; k != "request" && k != "stop" {
			t.Fatalf("data.actions entry of kind %v", k)
		}
	}
	if len(env["actions"].([]any)) == 0 || env["formatVersion"] != "1" {
		t.Fatalf("envelope: %s", r.Body)
	}
	id = data["session"].(map[string]any)["id"].(string)
	registrationSecrets.Store(id, data["registrationSecret"].(string))
	capability := data["agentCapability"].(string)
	authz = data["authorizationHeader"].(string)
	if id == "" || !strings.HasPrefix(capability, "sbx_") || authz != "Bearer "+capability {
		t.Fatalf("session %q, capability %q, header %q", id, capability, authz)
	}
	return id, authz
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func attemptHeaders(authz, key string) http.Header {
	return http.Header{"Authorization": {authz}, "Idempotency-Key": {key}}
}

// TestSandboxHolderFlowOverHTTP runs SPEC §4's holder flow against the real
// server: the holder library speaks plain HTTP, every answer is checked
// against the contract, and no read ever carries the capability.
func TestSandboxHolderFlowOverHTTP(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		c := ts.Client
		base := c.BaseURL
		ctx := context.Background()

		id, authz := createSandboxSession(t, c)
		capability := strings.TrimPrefix(authz, "Bearer ")
		noSecret := func(what string, body []byte) {
			t.Helper()
			if bytes.Contains(body, []byte(capability)) || bytes.Contains(body, []byte(`sbx_`)) {
				t.Fatalf("%s carries the capability: %s", what, body)
			}
		}
		r := c.Do("GET", "/v1/sandbox/sessions/"+id, nil, nil)
		if r.StatusCode != 200 || !reflect.DeepEqual(keys(r.JSON()["data"].(map[string]any)), []string{"session"}) {
			t.Fatalf("read: %d %s", r.StatusCode, r.Body)
		}
		noSecret("session read", r.Body)

		// The holder reads the published issuer key and registers the
		// mandate with the session id only.
		key, _ := holder.GenerateKey()
		issuer, err := holder.FetchIssuerKey(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := holder.NewMandate(id, issuer.KID, time.Now())
		mandate, _ := holder.SignMandate(key, m)
		r = c.Do("POST", "/v1/sandbox/sessions/"+id+"/mandate", mandateBody(id, mandate), nil)
		if r.StatusCode != 201 {
			t.Fatalf("mandate: %d %s", r.StatusCode, r.Body)
		}
		md := r.JSON()["data"].(map[string]any)
		if md["budgetRemainingUsd"] != 100.0 || md["receipt"] == nil || md["undo"] == nil {
			t.Fatalf("mandate answer: %s", r.Body)
		}

		// The agent: allowed, with the capability and an Idempotency-Key.
		r = c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": "allowed"}, attemptHeaders(authz, "k-allowed"))
		if r.StatusCode != 201 {
			t.Fatalf("allowed: %d %s", r.StatusCode, r.Body)
		}
		noSecret("attempt answer", r.Body)
		ad := r.JSON()["data"].(map[string]any)
		att := ad["attempt"].(map[string]any)
		if att["outcome"] != "charged" || !strings.Contains(att["receipt"].(string), ".") || ad["gate"] != nil || ad["budgetRemainingUsd"] != 95.0 {
			t.Fatalf("allowed answer: %s", r.Body)
		}
		if u := ad["undo"].(map[string]any); u["irreversible"] != true || u["command"] != nil {
			t.Fatalf("undo: %v", u)
		}
		// Same key and body: the stored answer, not a second charge.
		again := c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": "allowed"}, attemptHeaders(authz, "k-allowed"))
		if again.Header.Get("Idempotency-Replayed") != "true" || again.JSON()["replayed"] != true {
			t.Fatalf("replay: %d %s", again.StatusCode, again.Body)
		}

		// Approval: a gate for the holder.
		r = c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": "approval"}, attemptHeaders(authz, "k-approval"))
		if r.StatusCode != 201 {
			t.Fatalf("approval: %d %s", r.StatusCode, r.Body)
		}
		var ar struct {
			Data struct {
				Attempt struct{ Outcome string }
				Gate    holder.Gate
			}
		}
		json.Unmarshal(r.Body, &ar)
		if ar.Data.Attempt.Outcome != "gated" || ar.Data.Gate.ID == "" {
			t.Fatalf("approval answer: %s", r.Body)
		}
		decision, _ := holder.SignDecision(key, id, ar.Data.Gate, holder.Approve)
		r = c.Do("POST", "/v1/sandbox/sessions/"+id+"/gates/"+ar.Data.Gate.ID+"/decision", map[string]string{"decision": decision}, nil)
		if r.StatusCode != 200 {
			t.Fatalf("decision: %d %s", r.StatusCode, r.Body)
		}
		dd := r.JSON()["data"].(map[string]any)
		proofID, _ := dd["proofId"].(string)
		if !sandboxproof.ProofIDPattern().MatchString(proofID) || dd["gate"].(map[string]any)["state"] != "decided" {
			t.Fatalf("decision answer: %s", r.Body)
		}
		// A second decision, and the same signature replayed without the
		// holder's idempotency key, are refused.
		deny, _ := holder.SignDecision(key, id, ar.Data.Gate, holder.Deny)
		for _, d := range []string{deny, decision} {
			r = c.Do("POST", "/v1/sandbox/sessions/"+id+"/gates/"+ar.Data.Gate.ID+"/decision", map[string]string{"decision": d}, nil)
			if r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:gate_decided" {
				t.Fatalf("second decision: %d %s", r.StatusCode, r.Body)
			}
		}

		// The proof: {data: <proof>}, and a proof of this very session.
		r = c.Do("GET", "/v1/sandbox/proofs/"+proofID, nil, nil)
		if r.StatusCode != 200 {
			t.Fatalf("proof: %d %s", r.StatusCode, r.Body)
		}
		noSecret("proof", r.Body)
		var pe struct{ Data json.RawMessage }
		json.Unmarshal(r.Body, &pe)
		files := releaseFiles(t, base)
		files.Proof = pe.Data
		files.APIResponse = r.Body
		rel := sandboxproof.Release{ProofID: proofID, Proof: files.Proof, ProofJWKS: files.ProofJWKS, IssuerJWKS: files.IssuerJWKS,
			Provenance: files.Provenance, VerifierMJS: files.VerifierMJS, HolderMJS: files.HolderMJS}
		// The reference provenance names another proof; this check is about
		// the live session's proof under the published keys.
		files.Provenance, _ = sandboxproof.BuildProvenance(sandboxproof.Provenance{ProofID: proofID, ObservedAt: time.Now()})
		rel.Provenance = files.Provenance
		files.Manifest, _ = rel.Manifest()
		if rep := verifier.VerifyFiles(files, true); rep.Verdict != verifier.Accept {
			t.Fatalf("live proof rejected: %+v", rep.Failed())
		}

		r = c.Do("GET", "/v1/sandbox/sessions/"+id, nil, nil)
		noSecret("proven session read", r.Body)
		s := r.JSON()["data"].(map[string]any)["session"].(map[string]any)
		if s["state"] != "proven" || s["proofId"] != proofID {
			t.Fatalf("proven session: %s", r.Body)
		}
	})
}

// TestAgentCannotActAsHolder tries every way an agent could stand in for
// the holder: its API key or the sandbox capability on the holder
// endpoints, over REST and MCP, a capability of one session on another,
// and a decision signed by a key of its own.
func TestAgentCannotActAsHolder(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		c := ts.Client
		agentKey := ts.Key(t, "read", "quote", "launch", "buy_domain")
		id, authz := createSandboxSession(t, c)
		otherID, otherAuthz := createSandboxSession(t, c)
		key, _ := holder.GenerateKey()
		issuer, _ := holder.FetchIssuerKey(context.Background(), c.BaseURL)
		m, _ := holder.NewMandate(id, issuer.KID, time.Now())
		mandate, _ := holder.SignMandate(key, m)

		refusedAs := func(what string, r *contracttest.Response, status int, code string) {
			t.Helper()
			if r.StatusCode != status || r.JSON()["blockedBy"] != code || len(r.JSON()["actions"].([]any)) == 0 {
				t.Fatalf("%s: %d %s, want %d %s", what, r.StatusCode, r.Body, status, code)
			}
		}
		for name, h := range map[string]string{"agent key": "Bearer " + agentKey, "capability": authz, "any header": "Bearer x"} {
			r := c.Do("POST", "/v1/sandbox/sessions/"+id+"/mandate", mandateBody(id, mandate), http.Header{"Authorization": {h}})
			refusedAs("mandate with "+name, r, 403, "auth:agent_authority_refused")
		}
		r := c.Do("POST", "/v1/sandbox/sessions/"+id+"/mandate", mandateBody(id, mandate), nil)
		if r.StatusCode != 201 {
			t.Fatalf("holder's mandate: %d %s", r.StatusCode, r.Body)
		}

		// Attempts take this session's capability and nothing else.
		for name, h := range map[string]string{"agent key": "Bearer " + agentKey, "other session's capability": otherAuthz} {
			r := c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": "approval"}, attemptHeaders(h, "k-"+strings.ReplaceAll(name, " ", "-")))
			refusedAs("attempt with "+name, r, 401, "auth:invalid_credentials")
		}
		r = c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": "approval"}, nil)
		refusedAs("attempt without Authorization", r, 401, "auth:missing_credentials")
		r = c.Do("POST", "/v1/sandbox/sessions/"+otherID+"/attempts", map[string]string{"scenario": "approval"}, attemptHeaders(otherAuthz, "k-other"))
		refusedAs("attempt before the mandate", r, 409, "conflict:state")

		r = c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": "approval"}, attemptHeaders(authz, "k-1"))
		var ar struct{ Data struct{ Gate holder.Gate } }
		json.Unmarshal(r.Body, &ar)
		gatePath := "/v1/sandbox/sessions/" + id + "/gates/" + ar.Data.Gate.ID + "/decision"
		decision, _ := holder.SignDecision(key, id, ar.Data.Gate, holder.Approve)

		// Agent authority on the decision, over REST and over MCP.
		for name, h := range map[string]string{"agent key": "Bearer " + agentKey, "capability": authz} {
			r := c.Do("POST", gatePath, map[string]string{"decision": decision}, http.Header{"Authorization": {h}})
			refusedAs("decision with "+name, r, 403, "auth:agent_authority_refused")
			if got := mcpToolError(t, c.BaseURL, h, "decide_sandbox_gate", map[string]any{"id": id, "gateId": ar.Data.Gate.ID, "decision": decision}); got != "auth:agent_authority_refused" {
				t.Fatalf("MCP decision with %s: %s", name, got)
			}
		}
		// A decision the agent signs with a key of its own.
		own, _ := holder.GenerateKey()
		forged, _ := holder.SignDecision(own, id, ar.Data.Gate, holder.Approve)
		r = c.Do("POST", gatePath, map[string]string{"decision": forged}, nil)
		refusedAs("decision by another key", r, 403, "auth:invalid_signature")
		// The holder's decision for this gate, replayed onto another session.
		r = c.Do("POST", "/v1/sandbox/sessions/"+otherID+"/gates/"+ar.Data.Gate.ID+"/decision", map[string]string{"decision": decision}, nil)
		refusedAs("decision on another session", r, 404, "not_found:resource")

		// None of that touched the gate: the holder's decision still wins.
		s := c.Do("GET", "/v1/sandbox/sessions/"+id, nil, nil).JSON()["data"].(map[string]any)["session"].(map[string]any)
		if g := s["gates"].([]any)[0].(map[string]any); g["state"] != "open" {
			t.Fatalf("gate after refusals: %v", g)
		}
		r = c.Do("POST", gatePath, map[string]string{"decision": decision}, nil)
		if r.StatusCode != 200 {
			t.Fatalf("holder's decision: %d %s", r.StatusCode, r.Body)
		}
	})
}

// mcpToolError calls a tool over MCP with an Authorization header and
// returns the blockedBy of its error result.
func mcpToolError(t *testing.T, base, authz, tool string, args map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	req, _ := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", authz)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rpc struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				BlockedBy string `json:"blockedBy"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &rpc); err != nil || !rpc.Result.IsError {
		t.Fatalf("MCP %s: %d %s", tool, resp.StatusCode, raw)
	}
	return rpc.Result.StructuredContent.BlockedBy
}

// releaseFiles downloads the published release.
func releaseFiles(t *testing.T, base string) verifier.Files {
	t.Helper()
	get := func(path string) []byte {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	return verifier.Files{
		Manifest: get(sandboxproof.PathManifest), Proof: get(sandboxproof.PathProof), ProofJWKS: get(sandboxproof.PathProofJWKS),
		IssuerJWKS: get(sandboxproof.PathIssuerJWKS), Provenance: get(sandboxproof.PathProvenance),
		VerifierMJS: get(sandboxproof.PathVerifierMJS), HolderMJS: get(sandboxproof.PathHolderMJS),
	}
}

// TestReferenceReleaseServed checks the release a first start publishes:
// every file byte for byte as the manifest hashes it, with its content
// type, a strong ETag and immutable caching; the API proof equal to the
// static artifact; both verifiers accepting it and rejecting a tampered
// copy; and the same release after a restart.
func TestReferenceReleaseServed(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		dir := t.TempDir()
		ts := start(t, server.Config{DatabaseURL: db, DataDir: dir})
		c := ts.Client
		r := c.Do("GET", sandboxproof.PathManifest, nil, nil)
		var man map[string]any
		json.Unmarshal(r.Body, &man)
		if r.StatusCode != 200 || man["state"] != "available" || man["holderCliSha256"] == nil || man["verification"] != nil {
			t.Fatalf("manifest: %d %s", r.StatusCode, r.Body)
		}
		if r.Header.Get("Cache-Control") != "no-cache" || r.Header.Get("ETag") != `"`+sandboxproof.SHA256Hex(r.Body)+`"` {
			t.Fatalf("manifest headers: %v", r.Header)
		}
		for path, field := range map[string]string{
			sandboxproof.PathProof: "artifactSha256", sandboxproof.PathProofJWKS: "proofJwksSha256", sandboxproof.PathIssuerJWKS: "issuerJwksSha256",
			sandboxproof.PathProvenance: "provenanceSha256", sandboxproof.PathVerifierMJS: "verifierSha256", sandboxproof.PathHolderMJS: "holderCliSha256",
		} {
			r := c.Do("GET", path, nil, nil)
			sum := sandboxproof.SHA256Hex(r.Body)
			if r.StatusCode != 200 || sum != man[field] {
				t.Fatalf("%s: %d, hash %s, manifest %v", path, r.StatusCode, sum, man[field])
			}
			wantType := "application/json"
			if strings.HasSuffix(path, ".mjs") {
				wantType = "text/javascript; charset=utf-8"
			}
			if r.Header.Get("Content-Type") != wantType || r.Header.Get("ETag") != `"`+sum+`"` ||
				r.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
				t.Fatalf("%s headers: %v", path, r.Header)
			}
			nm := c.Do("GET", path, nil, http.Header{"If-None-Match": {`"` + sum + `"`}})
			if nm.StatusCode != 304 || len(nm.Body) != 0 {
				t.Fatalf("%s conditional: %d", path, nm.StatusCode)
			}
		}
		var prov map[string]any
		json.Unmarshal(c.Do("GET", sandboxproof.PathProvenance, nil, nil).Body, &prov)
		if prov["kind"] != "unsigned-observation" {
			t.Fatalf("provenance: %v", prov)
		}

		// The API proof's data equals the static artifact.
		r = c.Do("GET", "/v1/sandbox/proofs/"+man["proofId"].(string), nil, nil)
		var api struct{ Data any }
		json.Unmarshal(r.Body, &api)
		var static any
		json.Unmarshal(c.Do("GET", sandboxproof.PathProof, nil, nil).Body, &static)
		if r.StatusCode != 200 || !reflect.DeepEqual(api.Data, static) {
			t.Fatalf("API proof differs from proof.json: %s", r.Body)
		}

		rep, err := verifier.Verify(context.Background(), verifier.Options{BaseURL: c.BaseURL, APIURL: c.BaseURL, TamperCheck: true})
		if err != nil || rep.Verdict != verifier.Accept {
			t.Fatalf("Go verifier: %v %+v", err, rep.Failed())
		}
		node := nodeOrSkip(t)
		script := filepath.Join(t.TempDir(), "verify-sandbox-proof.mjs")
		writeDownload(t, c.BaseURL+sandboxproof.PathVerifierMJS, script)
		if node != "" {
			if out, err := exec.Command(node, script, "--base-url", c.BaseURL, "--tamper-check").CombinedOutput(); err != nil {
				t.Fatalf("node verifier: %v\n%s", err, out)
			}
		}

		// A tampered copy served in its place is rejected by both.
		tampered := tamperingProxy(t, c.BaseURL)
		if rep, _ := verifier.Verify(context.Background(), verifier.Options{BaseURL: tampered}); rep.Verdict != verifier.Reject {
			t.Fatal("Go verifier accepted a tampered release")
		}
		if node != "" {
			if out, err := exec.Command(node, script, "--base-url", tampered).CombinedOutput(); err == nil {
				t.Fatalf("node verifier accepted a tampered release:\n%s", out)
			}
		}

		// A restart on the same data keeps the release: it is immutable.
		before := c.Do("GET", sandboxproof.PathManifest, nil, nil).Body
		again := start(t, server.Config{DatabaseURL: db, DataDir: dir})
		if after := again.Client.Do("GET", sandboxproof.PathManifest, nil, nil).Body; !bytes.Equal(before, after) {
			t.Fatalf("the manifest changed across a restart:\n%s\n%s", before, after)
		}
	})
}

// tamperingProxy serves the release from base with one character of
// proof.json changed and the manifest's hash updated to match, so the
// change can only be caught by the signatures and the API comparison.
func tamperingProxy(t *testing.T, base string) string {
	t.Helper()
	fetch := func(path string) []byte {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	proof := fetch(sandboxproof.PathProof)
	var p map[string]string
	json.Unmarshal(proof, &p)
	sig := []byte(p["signature"])
	if sig[10] == 'A' {
		sig[10] = 'B'
	} else {
		sig[10] = 'A'
	}
	p["signature"] = string(sig)
	bad, _ := json.MarshalIndent(p, "", "  ")
	bad = append(bad, '\n')
	var man map[string]any
	json.Unmarshal(fetch(sandboxproof.PathManifest), &man)
	man["artifactSha256"] = sandboxproof.SHA256Hex(bad)
	badManifest, _ := json.MarshalIndent(man, "", "  ")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case sandboxproof.PathProof:
			w.Write(bad)
		case sandboxproof.PathManifest:
			w.Write(badManifest)
		default:
			w.Write(fetch(r.URL.Path))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeDownload(t *testing.T, url, path string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if err := writeFile(path, b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// nodeOrSkip finds node for the JavaScript verifier. Without it the Go
// checks still run and the node ones are left out, unless CI=true or
// PIER_TEST_NODE=require, when a missing node fails the test.
func nodeOrSkip(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("PIER_TEST_NODE") == "require" {
			t.Fatal("node is required to run verify-sandbox-proof.mjs")
		}
		t.Log("node not found; only the Go verifier runs")
		return ""
	}
	return node
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }

// TestSandboxRegistrationAndRetries: registering a mandate needs the
// session's registration secret, which only the creation answer shows;
// attempts need an Idempotency-Key; the holder's mandate and decision
// retries, sent with the same key, replay the stored answer.
func TestSandboxRegistrationAndRetries(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		c := ts.Client
		id, authz := createSandboxSession(t, c)
		secret := registrationOf(id)
		if r := c.Do("GET", "/v1/sandbox/sessions/"+id, nil, nil); strings.Contains(string(r.Body), secret) || strings.Contains(string(r.Body), "registrationSecret") {
			t.Fatalf("a read shows the registration secret: %s", r.Body)
		}
		key, _ := holder.GenerateKey()
		issuer, _ := holder.FetchIssuerKey(context.Background(), c.BaseURL)
		m, _ := holder.NewMandate(id, issuer.KID, time.Now())
		mandate, _ := holder.SignMandate(key, m)
		path := "/v1/sandbox/sessions/" + id + "/mandate"

		// Whoever knows only the session id cannot become its holder.
		for name, body := range map[string]map[string]string{
			"no secret":                {"mandate": mandate},
			"another session's secret": {"mandate": mandate, "registrationSecret": func() string { o, _ := createSandboxSession(t, c); return registrationOf(o) }()},
			"a guess":                  {"mandate": mandate, "registrationSecret": "sbr_guess"},
		} {
			r := c.Do("POST", path, body, nil)
			if r.StatusCode < 400 || r.StatusCode == 201 {
				t.Fatalf("%s: %d %s", name, r.StatusCode, r.Body)
			}
		}

		// The holder's retry of the same mandate, same key: the stored answer.
		k := http.Header{"Idempotency-Key": {"mandate-1"}}
		first := c.Do("POST", path, mandateBody(id, mandate), k)
		if first.StatusCode != 201 {
			t.Fatalf("mandate: %d %s", first.StatusCode, first.Body)
		}
		again := c.Do("POST", path, mandateBody(id, mandate), k)
		if again.StatusCode != 201 || again.Header.Get("Idempotency-Replayed") != "true" || again.JSON()["replayed"] != true {
			t.Fatalf("mandate retry: %d %s", again.StatusCode, again.Body)
		}

		// Attempts without an Idempotency-Key are refused.
		r := c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": "approval"}, http.Header{"Authorization": {authz}})
		if r.StatusCode != 400 || !strings.Contains(string(r.Body), "Idempotency-Key") {
			t.Fatalf("attempt without a key: %d %s", r.StatusCode, r.Body)
		}
		r = c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": "approval"}, attemptHeaders(authz, "k-gate"))
		var ar struct{ Data struct{ Gate holder.Gate } }
		json.Unmarshal(r.Body, &ar)
		decision, _ := holder.SignDecision(key, id, ar.Data.Gate, holder.Approve)
		// The holder client keys its posts by the JWS's digest: its retry of
		// a decision gets the stored answer, not a conflict.
		for i := range 2 {
			resp, err := holder.PostDecision(context.Background(), c.BaseURL, id, ar.Data.Gate.ID, decision)
			if err != nil {
				t.Fatalf("decision %d: %v", i, err)
			}
			if replayed := strings.Contains(string(resp.Body), `"replayed":true`); replayed != (i == 1) {
				t.Fatalf("decision %d: replayed %v: %s", i, replayed, resp.Body)
			}
		}
	})
}
