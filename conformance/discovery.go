package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/openapi"
)

var discoveryProbes = []probe{
	{"discovery.health", "SPEC.md §2.11 (target.buildId, which the runner reads from /healthz)", probeHealth},
	{"discovery.openapi", "SPEC.md §4, §9 rule 6", probeOpenAPI},
	{"discovery.schemas", "SPEC.md §2.1, §2.11, §9 rule 6", probeSchemas},
	{"discovery.oauth-metadata", "SPEC.md §5", probeOAuthMetadata},
	{"discovery.sandbox-reference", "SPEC.md §2.10, §4 rule 3", probeSandboxReference},
	{"discovery.scripts", "SPEC.md §2.10", probeScripts},
	{"discovery.mcp-tools", "SPEC.md §1, §4", probeMCPTools},
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func probeHealth(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "GET", "/healthz", nil, nil)
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("/healthz answered %d", x.status)
	}
	m := x.json()
	if m["status"] != "ok" {
		return fmt.Errorf("/healthz reads %.120s", x.body)
	}
	if b, _ := m["build"].(string); b != "" {
		r.buildID = limit(b, 160)
	}
	return nil
}

func probeOpenAPI(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "GET", "/openapi.json", nil, nil)
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("/openapi.json answered %d", x.status)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(x.body, &doc); err != nil {
		return fmt.Errorf("/openapi.json is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") || len(doc.Paths) == 0 {
		return fmt.Errorf("/openapi.json is not an OpenAPI 3 document with paths")
	}
	r.specDigest = sha256Hex(x.body)
	r.operations = map[string]bool{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			id, _ := op["operationId"].(string)
			if id == "" {
				return fmt.Errorf("%s %s has no operationId", strings.ToUpper(method), path)
			}
			r.operations[id] = true
		}
	}
	return nil
}

func probeSchemas(ctx context.Context, r *runner, p *probeRun) error {
	names, _ := fs.Glob(openapi.Schemas, "schemas/*.json")
	c := jsonschema.NewCompiler()
	var missing []string
	for _, n := range names {
		name := strings.TrimPrefix(n, "schemas/")
		x, err := r.do(ctx, p, "GET", "/schemas/"+name, nil, nil)
		if err != nil {
			return err
		}
		if x.status != 200 {
			missing = append(missing, fmt.Sprintf("%s (%d)", name, x.status))
			continue
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(x.body))
		if err != nil {
			return fmt.Errorf("%s is not JSON", name)
		}
		if err := c.AddResource("https://target.invalid/schemas/"+name, doc); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		if name == "conformance-run-v2.json" {
			r.schemaDigest = sha256Hex(x.body)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("schemas not served: %s", strings.Join(missing, ", "))
	}
	for _, n := range names {
		if _, err := c.Compile("https://target.invalid/" + n); err != nil {
			return fmt.Errorf("%s does not compile: %v", n, err)
		}
	}
	return nil
}

func probeOAuthMetadata(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "GET", "/.well-known/oauth-authorization-server", nil, nil)
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("authorization server metadata answered %d", x.status)
	}
	as := x.json()
	for _, k := range []string{"issuer", "authorization_endpoint", "token_endpoint"} {
		if s, _ := as[k].(string); s == "" {
			return fmt.Errorf("authorization server metadata lacks %s", k)
		}
	}
	methods, _ := as["code_challenge_methods_supported"].([]any)
	if !slices.Contains(methods, any("S256")) {
		return fmt.Errorf("authorization server does not offer PKCE S256")
	}
	x, err = r.do(ctx, p, "GET", "/.well-known/oauth-protected-resource", nil, nil)
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("protected resource metadata answered %d", x.status)
	}
	pr := x.json()
	servers, _ := pr["authorization_servers"].([]any)
	if s, _ := pr["resource"].(string); s == "" || len(servers) == 0 {
		return fmt.Errorf("protected resource metadata lacks resource or authorization_servers")
	}
	if !slices.Contains(servers, as["issuer"]) {
		return fmt.Errorf("the protected resource does not name the issuer %v", as["issuer"])
	}
	return nil
}

// manifest reads the sandbox reference manifest once per run.
func (r *runner) manifest(ctx context.Context, p *probeRun) (map[string]any, error) {
	if r.refManifest != nil {
		return r.refManifest, nil
	}
	x, err := r.do(ctx, p, "GET", sandboxproof.PathManifest, nil, nil)
	if err != nil {
		return nil, err
	}
	if x.status != 200 {
		return nil, fmt.Errorf("%s answered %d", sandboxproof.PathManifest, x.status)
	}
	if err := conformsTo("sandbox-reference.json", x.body); err != nil {
		return nil, fmt.Errorf("the manifest %w", err)
	}
	r.refManifest = x.json()
	return r.refManifest, nil
}

func probeSandboxReference(ctx context.Context, r *runner, p *probeRun) error {
	m, err := r.manifest(ctx, p)
	if err != nil {
		return err
	}
	if m["state"] != "available" {
		// Pending is a truthful state: the scripts are checked by
		// discovery.scripts against its verification hashes.
		return nil
	}
	files := map[string]string{
		"artifactSha256":   sandboxproof.PathProof,
		"proofJwksSha256":  sandboxproof.PathProofJWKS,
		"issuerJwksSha256": sandboxproof.PathIssuerJWKS,
		"provenanceSha256": sandboxproof.PathProvenance,
	}
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		x, err := r.do(ctx, p, "GET", files[k], nil, nil)
		if err != nil {
			return err
		}
		if x.status != 200 {
			return fmt.Errorf("%s answered %d", files[k], x.status)
		}
		if want, _ := m[k].(string); sha256Hex(x.body) != want {
			return fmt.Errorf("%s does not hash to the manifest's %s", files[k], k)
		}
	}
	return nil
}

func probeScripts(ctx context.Context, r *runner, p *probeRun) error {
	m, err := r.manifest(ctx, p)
	if err != nil {
		return err
	}
	hashes := m
	if v, ok := m["verification"].(map[string]any); ok && m["state"] != "available" {
		hashes = v
	}
	for path, key := range map[string]string{sandboxproof.PathVerifierMJS: "verifierSha256", sandboxproof.PathHolderMJS: "holderCliSha256"} {
		x, err := r.do(ctx, p, "GET", path, http.Header{"Accept": {"*/*"}}, nil)
		if err != nil {
			return err
		}
		if x.status != 200 {
			return fmt.Errorf("%s answered %d", path, x.status)
		}
		if ct := x.header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
			return fmt.Errorf("%s is served as %q, not JavaScript", path, ct)
		}
		if want, _ := hashes[key].(string); sha256Hex(x.body) != want {
			return fmt.Errorf("%s does not hash to the manifest's %s", path, key)
		}
	}
	return nil
}

// mcpToolFields are the members the MCP schema defines for a tool.
var mcpToolFields = map[string]bool{"name": true, "title": true, "description": true, "inputSchema": true, "outputSchema": true, "annotations": true, "_meta": true}

func probeMCPTools(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "POST", "/mcp", mcpAccept, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("tools/list answered %d", x.status)
	}
	m, err := mcpResult(x)
	if err != nil {
		return err
	}
	res, _ := m["result"].(map[string]any)
	tools, _ := res["tools"].([]any)
	if len(tools) == 0 {
		return fmt.Errorf("tools/list lists no tools")
	}
	for _, t := range tools {
		tool, _ := t.(map[string]any)
		name, _ := tool["name"].(string)
		for k := range tool {
			if !mcpToolFields[k] {
				return fmt.Errorf("tool %s carries %q, which the MCP schema does not define (Pier's own fields belong under _meta)", name, k)
			}
		}
		schema, _ := tool["inputSchema"].(map[string]any)
		if name == "" || schema["type"] != "object" {
			return fmt.Errorf("tool %q lacks a name or an object inputSchema", name)
		}
		if r.operations != nil && !r.operations[name] {
			return fmt.Errorf("tool %s is not an operation of /openapi.json", name)
		}
	}
	return nil
}
