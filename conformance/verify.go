package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/openapi"
	"github.com/pierhq/pier/sdk"
)

// Codes name why a report or chain was refused.
const (
	CodeUnreadable = "conformance:unreadable"
	CodeSchema     = "conformance:schema_invalid"
	CodeSignature  = "conformance:signature_invalid"
	CodeSummary    = "conformance:summary_mismatch"
	CodeChainGap   = "conformance:chain_gap"
	CodeChainOrder = "conformance:chain_order"
	// CodeSignerUntrusted: every check passed, but the key that signed is
	// one the report's own signature carried, not one the auditor trusts.
	CodeSignerUntrusted = "conformance:signer_untrusted"
	// CodeChainHead: the chain does not end where the auditor's anchor
	// says (its newest report was dropped, or reports are missing).
	CodeChainHead = "conformance:chain_head"
	// CodeChainUnanchored: a chain checked without an anchor, so that
	// nothing shows its newest reports are all there.
	CodeChainUnanchored = "conformance:chain_unanchored"
)

// Error is a typed refusal: Code is one of the Code constants.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// File is the report the refusal is about, when verifying several.
	File string `json:"file,omitempty"`
}

func (e *Error) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s: %s: %s", e.File, e.Code, e.Message)
	}
	return e.Code + ": " + e.Message
}

var (
	schemasOnce sync.Once
	schemas     map[string]*jsonschema.Schema
	schemasErr  error
)

// reportSchema compiles the published v1 and v2 report schemas, with
// formats (date-time, uri) asserted.
func reportSchema(version string) (*jsonschema.Schema, error) {
	schemasOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		schemas = map[string]*jsonschema.Schema{}
		for v, name := range map[string]string{SchemaV1: "conformance-run-v1.json", SchemaV2: "conformance-run-v2.json"} {
			b, err := fs.ReadFile(openapi.Schemas, "schemas/"+name)
			if err != nil {
				schemasErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				schemasErr = err
				return
			}
			url := "https://pier.invalid/schemas/" + name
			if err := c.AddResource(url, doc); err != nil {
				schemasErr = err
				return
			}
			s, err := c.Compile(url)
			if err != nil {
				schemasErr = err
				return
			}
			schemas[v] = s
		}
	})
	if schemasErr != nil {
		return nil, schemasErr
	}
	s, ok := schemas[version]
	if !ok {
		return nil, &Error{Code: CodeSchema, Message: fmt.Sprintf("schemaVersion %q is neither %s nor %s", version, SchemaV1, SchemaV2)}
	}
	return s, nil
}

// Validate checks a report against the published schema its
// schemaVersion names, v1 or v2: no member beyond the schema's anywhere.
func Validate(report []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report))
	if err != nil {
		return &Error{Code: CodeUnreadable, Message: "the report is not JSON: " + err.Error()}
	}
	m, _ := doc.(map[string]any)
	version, _ := m["schemaVersion"].(string)
	s, err := reportSchema(version)
	if err != nil {
		return err
	}
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		msg := err.Error()
		if errors.As(err, &ve) {
			msg = strings.Join(strings.Fields(ve.Error()), " ")
		}
		if len(msg) > 400 {
			msg = msg[:400] + "…"
		}
		return &Error{Code: CodeSchema, Message: msg}
	}
	return nil
}

// Verified is what verifying one report established.
type Verified struct {
	File           string                 `json:"file,omitempty"`
	SchemaVersion  string                 `json:"schemaVersion"`
	RunID          string                 `json:"runId"`
	Profile        string                 `json:"profile"`
	Outcome        string                 `json:"outcome"`
	Digest         string                 `json:"digest"`
	PreviousDigest *string                `json:"previousDigest"`
	StartedAt      time.Time              `json:"startedAt"`
	Signer         Signer                 `json:"signer"`
	Summary        sdk.ConformanceSummary `json:"summary"`
	// Holders names the holder each governed probe that ran records
	// (none, simulated or human; empty when it records none).
	Holders map[string]string `json:"holders,omitempty"`
	// HumanSeparation is true only when a governed probe that passed
	// records a human holder; a simulated holder never counts (SPEC §5).
	HumanSeparation bool `json:"humanSeparation"`
}

// VerifyReport checks one report: its schema, that its summary agrees with
// its probes, and its detached signature over its digest.
func VerifyReport(report []byte, sig string, trusted *jose.JSONWebKeySet) (*Verified, error) {
	if err := Validate(report); err != nil {
		return nil, err
	}
	// v1 and v2 share every member but schemaVersion.
	var r sdk.ConformanceRunReportV2
	if err := json.Unmarshal(report, &r); err != nil {
		return nil, &Error{Code: CodeUnreadable, Message: err.Error()}
	}
	for _, s := range r.Suites {
		if got := SuiteOutcome(s.Probes); got != s.Outcome {
			return nil, &Error{Code: CodeSummary, Message: fmt.Sprintf("suite %s reads %s but its probes make it %s", s.Id, s.Outcome, got)}
		}
	}
	if got := Summarize(r.Suites); got != r.Summary {
		return nil, &Error{Code: CodeSummary, Message: fmt.Sprintf("summary reads %d passed, %d failed, %d skipped, %s; the probes make it %d, %d, %d, %s",
			r.Summary.Passed, r.Summary.Failed, r.Summary.Skipped, r.Summary.Outcome, got.Passed, got.Failed, got.Skipped, got.Outcome)}
	}
	digest, err := Digest(report)
	if err != nil {
		return nil, &Error{Code: CodeUnreadable, Message: err.Error()}
	}
	signer, err := VerifySignature(sig, digest, trusted)
	if err != nil {
		return nil, err
	}
	v := &Verified{
		SchemaVersion: string(r.SchemaVersion), RunID: r.RunId, Profile: string(r.Profile),
		Outcome: string(r.Summary.Outcome), Digest: digest, PreviousDigest: r.PreviousDigest,
		StartedAt: r.StartedAt, Signer: signer, Summary: r.Summary,
		HumanSeparation: HumanSeparation(r.Suites),
	}
	for _, s := range r.Suites {
		if s.Id != SuiteGoverned {
			continue
		}
		for _, p := range s.Probes {
			if p.Status == NotRun {
				continue
			}
			if v.Holders == nil {
				v.Holders = map[string]string{}
			}
			v.Holders[p.Id] = ProbeHolder(p)
		}
	}
	return v, nil
}

// RequireTrusted refuses reports whose signer the auditor does not trust:
// verified with no key set, a report signed by anyone with any key would
// pass, since the key comes from the signature itself.
func RequireTrusted(vs []*Verified) error {
	for _, v := range vs {
		if !v.Signer.Trusted {
			return &Error{Code: CodeSignerUntrusted, File: v.File,
				Message: "signed by " + v.Signer.KID + ", a key the signature carries itself, which nothing you gave vouches for: compare it with the key you expect, then pass --keys with a JWKS holding it (a file, or the https URL its owner publishes it at)"}
		}
	}
	return nil
}

// Anchor is what an auditor knows of a chain's newest end from outside
// the chain: the digest of its newest report, or how many reports it
// holds. Without one, dropping the newest reports leaves a chain that
// still verifies.
type Anchor struct {
	// Head is the digest of the newest report.
	Head string
	// Count is the number of reports.
	Count int
}

// IsZero reports whether the anchor says nothing.
func (a Anchor) IsZero() bool { return a.Head == "" && a.Count == 0 }

// Check checks a chain, in VerifyChain's order (oldest first), against the
// anchor.
func (a Anchor) Check(chain []*Verified) error {
	if a.IsZero() {
		return &Error{Code: CodeChainUnanchored, Message: "nothing anchors the chain's newest report, so a chain with its newest reports removed would verify too: pass --head DIGEST (the newest report's digest, as pier conformance run printed it) or --count N"}
	}
	if len(chain) == 0 {
		return &Error{Code: CodeChainHead, Message: "the chain is empty"}
	}
	newest := chain[len(chain)-1]
	if a.Head != "" && newest.Digest != a.Head {
		for i, v := range chain {
			if v.Digest == a.Head {
				return &Error{Code: CodeChainHead, File: v.File, Message: fmt.Sprintf("the head you gave is report %d of %d: %d report(s) follow it, up to %s (digest %s); pass that digest as --head if you expect them", i+1, len(chain), len(chain)-1-i, newest.File, newest.Digest)}
			}
		}
		return &Error{Code: CodeChainHead, File: newest.File, Message: fmt.Sprintf("no report has the head digest %s: the newest report here is %s (digest %s), so the newest report may have been removed", a.Head, newest.File, newest.Digest)}
	}
	if a.Count != 0 && len(chain) != a.Count {
		if len(chain) < a.Count {
			return &Error{Code: CodeChainHead, File: newest.File, Message: fmt.Sprintf("the chain holds %d report(s), not the %d you expect: the newest may have been removed", len(chain), a.Count)}
		}
		return &Error{Code: CodeChainHead, File: newest.File, Message: fmt.Sprintf("the chain holds %d report(s), more than the %d you expect", len(chain), a.Count)}
	}
	return nil
}

// SignaturePath is where a report's detached signature is kept.
func SignaturePath(reportPath string) string { return reportPath + ".jws" }

// VerifyFile verifies the report at path with the signature beside it.
func VerifyFile(path string, trusted *jose.JSONWebKeySet) (*Verified, error) {
	report, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Code: CodeUnreadable, Message: err.Error(), File: path}
	}
	sig, err := os.ReadFile(SignaturePath(path))
	if err != nil {
		return nil, &Error{Code: CodeSignature, Message: "no signature beside the report: " + err.Error(), File: path}
	}
	v, err := VerifyReport(report, string(sig), trusted)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.File = path
		}
		return nil, err
	}
	v.File = path
	return v, nil
}

// VerifyChain verifies every report (*.json with its .jws) in dir and that
// they form one unbroken chain: in order of startedAt, the first has a null
// previousDigest and each later one names the digest of the one before. A
// report whose previousDigest names no report in dir is a gap; one that
// names a report other than its predecessor is out of order.
func VerifyChain(dir string, trusted *jose.JSONWebKeySet) ([]*Verified, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, &Error{Code: CodeUnreadable, Message: err.Error()}
	}
	if len(paths) == 0 {
		return nil, &Error{Code: CodeUnreadable, Message: "no reports (*.json) in " + dir}
	}
	var chain []*Verified
	for _, p := range paths {
		v, err := VerifyFile(p, trusted)
		if err != nil {
			return nil, err
		}
		chain = append(chain, v)
	}
	sort.SliceStable(chain, func(i, j int) bool { return chain[i].StartedAt.Before(chain[j].StartedAt) })
	byDigest := map[string]*Verified{}
	for _, v := range chain {
		byDigest[v.Digest] = v
	}
	for i, v := range chain {
		if i == 0 {
			if v.PreviousDigest != nil {
				if _, ok := byDigest[*v.PreviousDigest]; ok {
					return nil, &Error{Code: CodeChainOrder, File: v.File, Message: "the earliest report names a later one as its previous"}
				}
				return nil, &Error{Code: CodeChainGap, File: v.File, Message: "the earliest report's previous report (" + *v.PreviousDigest + ") is missing"}
			}
			continue
		}
		prev := chain[i-1]
		switch {
		case v.PreviousDigest == nil:
			return nil, &Error{Code: CodeChainOrder, File: v.File, Message: "a second chain starts here (previousDigest is null)"}
		case *v.PreviousDigest == prev.Digest:
		case byDigest[*v.PreviousDigest] != nil:
			return nil, &Error{Code: CodeChainOrder, File: v.File, Message: fmt.Sprintf("it follows %s, not %s, which started before it", byDigest[*v.PreviousDigest].File, prev.File)}
		default:
			return nil, &Error{Code: CodeChainGap, File: v.File, Message: "its previous report (" + *v.PreviousDigest + ") is missing between " + prev.File + " and it"}
		}
	}
	return chain, nil
}
