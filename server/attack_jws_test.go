package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// TestAttackSweepForgedPlans: apply_workflow takes a signed plan only
// when it is ES256 under the server's key named by its kid, over the
// plan stored for that workflow. alg none, HS256 keyed with the public
// key, another key under the server's kid, an embedded key, a second
// signature, and another workflow's genuine plan are each refused with
// plan:signature_invalid, and nothing runs.
func TestAttackSweepForgedPlans(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	bundle := upload(t, ts, a, siteSaying("planned"))
	names := availableDomains(2, "dev", "forged")
	wf := prepare(t, ts, a, siteWorkflow(a.project, bundle, names[0]))
	other := prepare(t, ts, a, siteWorkflow(a.project, bundle, names[1]))
	parts := strings.Split(wf["signedPlan"].(string), ".")
	var header map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[0])
	json.Unmarshal(raw, &header)
	jwks := ts.Client.Do("GET", "/.well-known/workflow-jwks.json", nil, nil).Body
	enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	with := func(extra map[string]any) string {
		h := map[string]any{}
		for k, v := range header {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return enc(h)
	}
	attacker, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	es256 := func(protected string) string {
		sum := sha256.Sum256([]byte(protected + "." + parts[1]))
		r, s, _ := ecdsa.Sign(rand.Reader, attacker, sum[:])
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return protected + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	hs256 := func(key []byte) string {
		p := with(map[string]any{"alg": "HS256"})
		m := hmac.New(sha256.New, key)
		m.Write([]byte(p + "." + parts[1]))
		return p + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	b64 := func(n *big.Int) string { return base64.RawURLEncoding.EncodeToString(n.FillBytes(make([]byte, 32))) }
	embedded := map[string]any{"kty": "EC", "crv": "P-256", "x": b64(attacker.X), "y": b64(attacker.Y)}
	forged := map[string]string{
		"alg none":                      with(map[string]any{"alg": "none"}) + "." + parts[1] + ".",
		"HS256 keyed with the JWKS":     hs256(jwks),
		"another key under the kid":     es256(with(nil)),
		"an embedded key":               es256(with(map[string]any{"jwk": embedded, "kid": "attacker"})),
		"an embedded key, server's kid": es256(with(map[string]any{"jwk": embedded})),
		"no kid":                        es256(with(map[string]any{"kid": ""})),
		"another workflow's plan":       other["signedPlan"].(string),
	}
	for what, plan := range forged {
		r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", map[string]any{"signedPlan": plan}, a.header())
		if r.StatusCode != 400 || r.JSON()["blockedBy"] != "plan:signature_invalid" {
			t.Errorf("%s: %d %s", what, r.StatusCode, r.Body)
		}
	}
	if tasks := ts.Client.Do("GET", "/v1/tasks", nil, a.header()).JSON()["data"].(map[string]any)["tasks"].([]any); len(tasks) != 0 {
		t.Errorf("a forged plan ran: %v", tasks)
	}
	r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", map[string]any{"signedPlan": wf["signedPlan"]}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("the genuine plan: %d %s", r.StatusCode, r.Body)
	}
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
}
