package verifier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pierhq/pier/verifier"
	"github.com/pierhq/pier/verifier/internal/vectors"
)

const vectorsDir = "testdata/vectors"

// releasePaths maps the URL paths of a release to a vector's file names.
var releasePaths = map[string]string{
	"/.well-known/sandbox-reference.json": vectors.FileManifest,
	"/reference/sandbox/proof.json":       vectors.FileProof,
	"/reference/sandbox/proof-jwks.json":  vectors.FileProofJWKS,
	"/reference/sandbox/issuer-jwks.json": vectors.FileIssuerJWKS,
	"/reference/sandbox/provenance.json":  vectors.FileProvenance,
	"/verify-sandbox-proof.mjs":           vectors.FileVerifierMJS,
	"/sandbox-holder.mjs":                 vectors.FileHolderMJS,
}

type vector struct {
	name   string
	dir    string
	expect vectors.Expect
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	entries, err := os.ReadDir(vectorsDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []vector
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(vectorsDir, e.Name())
		var exp vectors.Expect
		if err := json.Unmarshal(mustRead(t, filepath.Join(dir, vectors.FileExpect)), &exp); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out = append(out, vector{name: e.Name(), dir: dir, expect: exp})
	}
	if len(out) < 20 {
		t.Fatalf("found only %d vectors in %s", len(out), vectorsDir)
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveVector serves a vector directory as a release host, with the API
// proof at the manifest's proof id, the way the server lays it out.
func serveVector(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	var manifest struct {
		ProofID any `json:"proofId"`
	}
	_ = json.Unmarshal(mustRead(t, filepath.Join(dir, vectors.FileManifest)), &manifest)
	proofID, _ := manifest.ProofID.(string)
	mux := http.NewServeMux()
	for path, name := range releasePaths {
		body := mustRead(t, filepath.Join(dir, name))
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { w.Write(body) })
	}
	api := mustRead(t, filepath.Join(dir, vectors.FileAPIProof))
	mux.HandleFunc("GET /v1/sandbox/proofs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != proofID {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(api)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// outcome is what both verifiers are compared on: the verdict, and the
// check that stopped the run.
type outcome struct {
	verdict string
	failed  string
}

func outcomeOf(r *verifier.Report) outcome {
	o := outcome{verdict: string(r.Verdict)}
	if f := r.Failed(); f != nil {
		o.failed = string(f.ID)
	}
	return o
}

func wantOutcome(e vectors.Expect) outcome { return outcome{verdict: e.Verdict, failed: e.FailedCheck} }

func runNodeVerifier(t *testing.T, node string, args ...string) (*verifier.Report, int) {
	t.Helper()
	cmd := exec.Command(node, append([]string{"js/verify-sandbox-proof.mjs", "--json", "--tamper-check"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("node: %v", err)
	}
	var r verifier.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("node output is not a JSON report: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return &r, code
}

func TestVectors(t *testing.T) {
	node := nodeOrSkipLater(t)
	for _, v := range loadVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			srv := serveVector(t, v.dir)
			want := wantOutcome(v.expect)

			goReport, err := verifier.Verify(context.Background(), verifier.Options{BaseURL: srv.URL, TamperCheck: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomeOf(goReport); got != want {
				t.Errorf("Go verifier: got %+v, want %+v (%s)\nchecks: %s", got, want, v.expect.Reason, checksText(goReport))
			}
			if v.expect.Verdict == "accept" {
				last := goReport.Checks[len(goReport.Checks)-1]
				if last.ID != verifier.CheckTamperRejected || !last.OK {
					t.Errorf("Go verifier: the tamper check did not run and pass: %+v", last)
				}
			}

			offline := verifier.VerifyFiles(filesOf(t, v.dir), true)
			if got := outcomeOf(offline); got != want {
				t.Errorf("Go verifier offline: got %+v, want %+v", got, want)
			}

			if node == "" {
				return
			}
			jsReport, code := runNodeVerifier(t, node, "--base-url", srv.URL)
			if got := outcomeOf(jsReport); got != want {
				t.Errorf("JS verifier: got %+v, want %+v (%s)\nchecks: %s", got, want, v.expect.Reason, checksText(jsReport))
			}
			if wantCode := map[string]int{"accept": 0, "reject": 1}[v.expect.Verdict]; code != wantCode {
				t.Errorf("JS verifier exit code %d, want %d", code, wantCode)
			}
			// Stopping at the first failure in the same order means both
			// ran exactly the same checks.
			if a, b := checkIDs(goReport), checkIDs(jsReport); a != b {
				t.Errorf("the verifiers ran different checks:\nGo: %s\nJS: %s", a, b)
			}
		})
	}
}

// nodeOrSkipLater returns "" instead of skipping, so that the Go half of the
// vectors still runs where node is missing outside CI.
func nodeOrSkipLater(t *testing.T) string {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required in CI to run the JavaScript verifier")
		}
		t.Log("node not found; only the Go verifier runs")
		return ""
	}
	return node
}

func filesOf(t *testing.T, dir string) verifier.Files {
	read := func(name string) []byte { return mustRead(t, filepath.Join(dir, name)) }
	return verifier.Files{
		Manifest: read(vectors.FileManifest), Proof: read(vectors.FileProof),
		ProofJWKS: read(vectors.FileProofJWKS), IssuerJWKS: read(vectors.FileIssuerJWKS),
		Provenance: read(vectors.FileProvenance), VerifierMJS: read(vectors.FileVerifierMJS),
		HolderMJS: read(vectors.FileHolderMJS), APIResponse: read(vectors.FileAPIProof),
	}
}

func checksText(r *verifier.Report) string {
	b, _ := json.MarshalIndent(r.Checks, "", "  ")
	return string(b)
}

func checkIDs(r *verifier.Report) string {
	var b bytes.Buffer
	for _, c := range r.Checks {
		b.WriteString(string(c.ID))
		if !c.OK {
			b.WriteString("(failed)")
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// TestVectorsReproducible regenerates the vectors and requires the committed
// ones to match byte for byte, so that they cannot drift from the minting
// code. Run `go run ./verifier/internal/vectorgen` from the module root after
// changing the format.
func TestVectorsReproducible(t *testing.T) {
	keys, err := vectors.LoadKeys("testdata/keys")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := vectors.Generate(out, keys); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		committed, err := os.ReadFile(filepath.Join(vectorsDir, rel))
		if err != nil {
			t.Errorf("%s is generated but not committed", rel)
			return nil
		}
		if !bytes.Equal(committed, mustRead(t, path)) {
			t.Errorf("%s differs from what the generator writes now", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
